// Empty: the target that builds the libraries' precompiled header
// (cmake/FaultlineBuildSpeed.cmake).
