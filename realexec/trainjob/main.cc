// faultline-trainjob: the reference training job of live mode (see trainjob/trainer.h).

#include "realexec/trainjob/trainer.h"

int main(int argc, char** argv) { return faultline::live::trainjob::trainjob_main(argc, argv); }
