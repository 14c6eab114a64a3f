// cordon: the supervisor binary. All logic lives in the libraries; see runner/cli.cc.
#include "cli/cli.h"

int main(int argc, char** argv, char** envp) { return cordon::RunCli(argc, argv, envp); }
