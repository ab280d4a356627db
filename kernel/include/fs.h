// On-disk layout of the aisvc file system, shared by the kernel and the
// host's image builder and checker (pyaisvc/cheader.py reads the #defines
// and structs below for pyaisvc/image/fsimg.py and fscheck.py, so this file is the
// one place these facts live).
//
// The disk is an array of BSIZE-byte blocks:
//
//   [ boot | super | log header | log ... | inodes ... | bitmap ... | data ... ]
//     0      1       2
//
// Blocks are 4 KiB, the page size, so a block fits a page and one disk
// request of a few blocks moves a useful amount of data. Block numbers are
// 32 bits: an image can hold 2^32 blocks (16 TiB); we test 4 GiB ones.
// An inode has NDIRECT direct blocks, one single-indirect block (1024
// numbers) and one double-indirect block (1024 x 1024 numbers), so a file
// can grow to (26 + 1024 + 1024*1024) blocks, just over 4 GiB; file sizes
// are 64 bits for that reason.
#ifndef AISVC_FS_H
#define AISVC_FS_H

#define ROOTINO   1          // root directory inode number
#define BSIZE     4096       // block size in bytes
#define FSMAGIC   0x41495346 // "AISF" in the superblock
#define FSVERSION 1          // bumped whenever this layout changes

// Superblock, in block 1. All fields are block counts or block numbers.
struct superblock {
  uint32 magic;      // must be FSMAGIC
  uint32 version;    // must be FSVERSION
  uint32 size;       // size of the image in blocks
  uint32 nblocks;    // number of data blocks
  uint32 ninodes;    // number of inodes
  uint32 nlog;       // number of log blocks, header included
  uint32 logstart;   // block number of the log header
  uint32 inodestart; // block number of the first inode block
  uint32 bmapstart;  // block number of the first free-map block
};

#define NDIRECT    26
#define NINDIRECT  (BSIZE / sizeof(uint32))
#define NDINDIRECT (NINDIRECT * NINDIRECT)
#define MAXFILE    (NDIRECT + NINDIRECT + NDINDIRECT) // in blocks

// On-disk inode: 128 bytes, 32 per block.
// addrs[NDIRECT] is the single-indirect block, addrs[NDIRECT+1] the
// double-indirect one; 0 means "no block" (block 0 is never data).
#define MAXLINK 32767 // most links to an inode: nlink is a short

struct dinode {
  short type;  // T_DIR, T_FILE, T_DEVICE (stat.h), 0 if free
  short major; // device number (T_DEVICE only)
  short minor;
  short nlink;               // directory entries that refer to this inode (1..MAXLINK)
  uint64 size;               // file size in bytes (offset 8: aligned)
  uint32 addrs[NDIRECT + 2]; // data block numbers
};

#define IPB           (BSIZE / sizeof(struct dinode)) // inodes per block
#define IBLOCK(i, sb) ((i) / IPB + (sb).inodestart)   // block holding inode i
#define BPB           (BSIZE * 8)                     // bitmap bits per block
#define BBLOCK(b, sb) ((b) / BPB + (sb).bmapstart)    // bitmap block of block b

// Directory entry: 32 bytes, 128 per block. DIRSIZ is 30 so that an entry
// stays a power of two (entries never straddle a block) while names twice
// as long as xv6's 14 fit, e.g. "tokenizer_merges.bin". Inode numbers are
// therefore 16 bits: an image has at most MAXINODES inodes.
#define DIRSIZ    30
#define MAXINODES 65535

struct dirent {
  ushort inum;       // 0: free entry
  char name[DIRSIZ]; // not NUL-terminated when DIRSIZ long
};

#endif
