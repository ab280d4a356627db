// mmap()'s protections and flags, shared by the kernel (kernel/core/mmap.c)
// and user programs; docs/VM.md has the rules.
#ifndef AISVC_MMAN_H
#define AISVC_MMAN_H

#define PROT_READ  0x1 // every mapping is readable
#define PROT_WRITE 0x2 // private mappings only: writes go to the process's own copy

#define MAP_SHARED  0x1 // the page cache's pages themselves, read-only
#define MAP_PRIVATE 0x2 // the page cache's pages until written (copy-on-write)

#endif
