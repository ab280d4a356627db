// ELF64 executable format: the parts exec() reads.
#ifndef AISVC_ELF_H
#define AISVC_ELF_H

#include "types.h"

#define ELF_MAGIC   0x464C457FU // "\x7FELF" in little endian
#define ELFCLASS64  2
#define ELFDATA2LSB 1
#define ET_EXEC     2
#define EM_RISCV    243

struct elfhdr {
  uint32 magic; // ELF_MAGIC
  uint8 class;  // ELFCLASS64
  uint8 data;   // ELFDATA2LSB
  uint8 ident_version;
  uint8 ident_pad[9];
  uint16 type;    // ET_EXEC
  uint16 machine; // EM_RISCV
  uint32 version;
  uint64 entry;
  uint64 phoff;
  uint64 shoff;
  uint32 flags;
  uint16 ehsize;
  uint16 phentsize;
  uint16 phnum;
  uint16 shentsize;
  uint16 shnum;
  uint16 shstrndx;
};

struct proghdr {
  uint32 type;
  uint32 flags;
  uint64 off;
  uint64 vaddr;
  uint64 paddr;
  uint64 filesz;
  uint64 memsz;
  uint64 align;
};

#define ELF_PROG_LOAD   1
#define ELF_PROG_FLAG_X 1
#define ELF_PROG_FLAG_W 2
#define ELF_PROG_FLAG_R 4

#endif
