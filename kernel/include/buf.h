// A buffer of the block cache: one disk block in memory (see bio.c).
#ifndef AISVC_BUF_H
#define AISVC_BUF_H

struct buf {
  // guarded by bcache.lock:
  uint dev;
  uint blockno;
  uint refcnt;      // holders, plus one while the log pins it
  int dirty;        // logged but not yet installed at home
  struct buf *prev; // LRU list, most recently used first
  struct buf *next;
  struct buf *hnext; // hash chain of bcache.hash[]
  // guarded by lock (the sleeplock):
  struct sleeplock lock;
  int valid; // data holds the block's contents
  // guarded by the virtio disk lock while a request is in flight:
  int disk;    // the disk owns the buffer
  uchar *data; // BSIZE bytes, a page of its own (kalloc)
};

#endif
