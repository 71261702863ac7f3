#include "cli/commands.h"

int main(int argc, char** argv) { return cpinfer::cli_main(argc, argv); }
