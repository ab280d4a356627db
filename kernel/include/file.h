// Open files, in-memory inodes and device switch (see file.c and fs.c).
#ifndef AISVC_FILE_H
#define AISVC_FILE_H

struct file {
  enum { FD_NONE, FD_PIPE, FD_INODE, FD_DEVICE } type;
  int ref; // reference count; guarded by ftable.lock
  char readable;
  char writable;
  struct pipe *pipe; // FD_PIPE
  struct inode *ip;  // FD_INODE and FD_DEVICE
  uint64 off;        // FD_INODE; guarded by ip->lock
  short major;       // FD_DEVICE
};

// In-memory copy of an inode.
struct inode {
  // guarded by itable.lock:
  uint dev;  // device number
  uint inum; // inode number
  int ref;   // reference count
  // guarded by lock:
  struct sleeplock lock;
  int valid;  // the fields below were read from disk
  short type; // copy of struct dinode
  short major;
  short minor;
  short nlink;
  uint64 size;
  uint addrs[NDIRECT + 2];
  uint lastalloc; // block balloc gave this inode last, 0 if none yet
};

// Device switch: functions per major device number.
// user_src/user_dst: 1 if the address is a user virtual address.
// open (optional) runs when open() makes a new open file of the device
// and may refuse it with a negative errno; close (optional) runs when the
// last reference to such a file goes (fork and dup share one open).
struct devsw {
  int (*read)(int user_dst, uint64 dst, int n);
  int (*write)(int user_src, uint64 src, int n);
  int (*open)(void);
  void (*close)(void);
};

#define NDEV    10 // major device numbers
#define CONSOLE 1  // the console's major number
#define PORT    3  // the gateway's virtio console port (virtio_console.c)

extern struct devsw devsw[];

#endif
