// struct stat, filled by fstat(); shared by the kernel and user programs.
#ifndef AISVC_STAT_H
#define AISVC_STAT_H

#define T_DIR    1 // directory
#define T_FILE   2 // regular file
#define T_DEVICE 3 // device

struct stat {
  int dev;     // file system's disk device
  uint ino;    // inode number
  short type;  // T_DIR, T_FILE or T_DEVICE
  short nlink; // number of links to the file
  uint64 size; // size of the file in bytes
};

#endif
