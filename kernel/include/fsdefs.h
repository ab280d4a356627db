// Cross-file prototypes of the file system and the disk driver, grouped by
// file. defs.h includes this file at its end.
#ifndef AISVC_FSDEFS_H
#define AISVC_FSDEFS_H

struct buf;
struct file;
struct inode;
struct pipe;
struct stat;
struct superblock;

// A piece of physical memory that a disk request reads into or writes from.
struct blkseg {
  uint64 pa;
  uint32 len;
};

// bio.c
void binit(void);
struct buf *bread(uint dev, uint blockno);
struct buf *bread_zero(uint dev, uint blockno);
void bwrite(struct buf *b);
void brelse(struct buf *b);
void bpin(struct buf *b);
void bunpin(struct buf *b);
uint bclean_run(uint dev, uint blockno, uint n);

// log.c
void initlog(int dev, struct superblock *sb, int readonly);
int fs_readonly(void);
void log_write(struct buf *b);
void begin_op(void);
void end_op(void);

// fs.c
extern struct superblock sb;
void fsinit(int dev);
int ialloc(uint dev, short type, struct inode **ipp);
struct inode *idup(struct inode *ip);
void iinit(void);
int ilock(struct inode *ip);
void iput(struct inode *ip);
void iunlock(struct inode *ip);
void iunlockput(struct inode *ip);
void iupdate(struct inode *ip);
void itrunc(struct inode *ip);
int namecmp(const char *s, const char *t);
int dirlookup(struct inode *dp, char *name, uint *poff, struct inode **ipp);
int dirlink(struct inode *dp, char *name, uint inum);
int namei_err(char *path, struct inode **ipp);
int nameiparent_err(char *path, char *name, struct inode **ipp);
struct inode *namei(char *path);
int readi(struct inode *ip, int user_dst, uint64 dst, uint64 off, uint n);
int writei(struct inode *ip, int user_src, uint64 src, uint64 off, uint n);
void stati(struct inode *ip, struct stat *st);

int readi_pages(struct inode *ip, uint64 index, uint64 *pa, int n);

// pagecache.c
struct sysinfo;
void pagecache_init(uint64 ram_end);
int pagecache_get(struct inode *ip, uint64 index, int ahead, uint64 *pa);
int pagecache_peek(struct inode *ip, uint64 index, int n, uint64 *pa);
void pagecache_dup(uint64 pa);
void pagecache_put(uint64 pa);
int pagecache_refs(uint64 pa);
void pagecache_write(struct inode *ip, uint64 index, const uchar *data, uint64 size);
void pagecache_forget(struct inode *ip);
uint64 pagecache_reclaim(uint64 want);
void pagecache_stats(struct sysinfo *si);

// sysfile.c
int argfd(int n, struct file **pf);

// file.c
struct file *filealloc(void);
int file_count(void);
void fileclose(struct file *f);
struct file *filedup(struct file *f);
void fileinit(void);
int fileread(struct file *f, uint64 addr, int n);
int filestat(struct file *f, uint64 addr);
int filewrite(struct file *f, uint64 addr, int n);

// pipe.c
int pipealloc(struct file **f0, struct file **f1);
void pipeclose(struct pipe *pi, int writable);
int piperead(struct pipe *pi, uint64 addr, int n);
int pipewrite(struct pipe *pi, uint64 addr, int n);

// virtio_blk.c
void virtio_disk_init(void);
int virtio_disk_io(uint64 blockno, struct blkseg *segs, int nseg, int write);
void virtio_disk_rw(struct buf *b, int write);
void virtio_disk_intr(void);
int virtio_disk_maxsegs(void);
uint64 virtio_disk_capacity(void);
int virtio_disk_flush(void);

#endif
