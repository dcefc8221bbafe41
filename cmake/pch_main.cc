// Empty program: the target that builds the test programs' precompiled header
// (cmake/FaultlineBuildSpeed.cmake).
int main() { return 0; }
