// sysinfo(): the kernel's resource counts, for leak checks (the fuzzer
// user/tests/fuzz.c compares them before and after its run). Shared by
// the kernel (sysproc.c) and user programs.
#ifndef AISVC_SYSINFO_H
#define AISVC_SYSINFO_H

#include "types.h"

struct sysinfo {
  uint64 freepages; // free physical pages (kalloc.c)
  int procs;        // process table slots in use, zombies included
  int files;        // open-file table slots in use (file.c)
};

#endif
