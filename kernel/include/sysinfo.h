// sysinfo(): the kernel's resource counts, for leak checks (the fuzzer
// user/tests/fuzz.c compares them before and after its run) and for
// vmstat (user/bin/vmstat.c). Shared by the kernel (sysproc.c) and user
// programs.
#ifndef AISVC_SYSINFO_H
#define AISVC_SYSINFO_H

#include "types.h"

struct sysinfo {
  uint64 freepages; // free physical pages (kalloc.c), the page cache's idle ones included
  int procs;        // process table slots in use, zombies included
  int files;        // open-file table slots in use (file.c)
  // The page cache (kernel/fs/pagecache.c), since boot:
  uint64 cachepages; // file pages it holds
  uint64 cacheidle;  // of those, the ones no mapping uses (reclaimable)
  uint64 hits;       // faults it answered from memory
  uint64 misses;     // faults that read the disk
  uint64 readahead;  // pages read beside a missed one, in the same request
  uint64 evictions;  // idle pages reclaimed for other uses
  // The calling process's file mappings (kernel/core/mmap.c):
  uint64 resident; // pages mapped now
  uint64 shared;   // of those, cache pages another mapping uses too
  uint64 faults;   // page faults that filled a mapping, since exec
};

#endif
