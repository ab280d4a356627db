// Driver for the virtio block device (the disk), over modern virtio-mmio
// (version 2; QEMU needs -global virtio-mmio.force-legacy=false).
//
// One split virtqueue carries requests. A request is a descriptor chain:
// a header (read or write, first sector), one descriptor per piece of
// memory to transfer, and a status byte the device fills in. A request
// costs about 25 us whatever its size (docs/PERF_NOTES.md, fact 6, "a disk
// request costs about 25 us"), so callers hand over many blocks at once:
// virtio_disk_io() takes a list of physically contiguous segments, up to
// virtio_disk_maxsegs() of them.
//
// Requests from several processes are in flight at once: each allocates
// its descriptors, queues its chain and sleeps; the interrupt handler
// marks finished chains done and wakes their owners. A process that finds
// too few free descriptors sleeps until a request completes.
//
// Durability: QEMU offers VIRTIO_BLK_F_FLUSH, which lets it complete a
// write once the data is in the host's page cache (about 0.1 ms instead
// of 1.4 ms for write-through). A FLUSH request (header and status, no
// data) then makes every completed write durable; the log sends one at
// each step of a commit (log.c). Building with -DAISVC_NOFLUSH turns the
// requests off, to measure what they cost.
//
// Request headers and status bytes live in this file's static data, which
// the kernel maps 1:1, so their virtual address is the physical one the
// device needs.

#include "types.h"
#include "param.h"
#include "fsparam.h"
#include "memlayout.h"
#include "spinlock.h"
#include "sleeplock.h"
#include "riscv.h"
#include "defs.h"
#include "errno.h"
#include "fs.h"
#include "buf.h"
#include "virtio.h"

#define R(r)              ((volatile uint32 *)(VIRTIO0 + (r)))
#define SECTORS_PER_BLOCK (BSIZE / 512)

static struct disk {
  struct spinlock lock;
  // set up once by virtio_disk_init:
  struct virtq_desc *desc;
  struct virtq_avail *avail;
  struct virtq_used *used;
  int num;        // queue size, a power of two
  int maxsegs;    // data descriptors per request
  uint64 nblocks; // disk capacity in blocks
  int flush;      // the device caches writes: send FLUSH at commits
  // guarded by lock:
  uint16 freelist[VIRTQ_MAX]; // free descriptor numbers (a stack)
  int nfree;
  int waiting;     // processes sleeping for descriptors
  uint16 used_idx; // next used-ring entry to look at
  struct {
    int inflight;                       // the chain is the device's (queued, not done)
    int done;                           // the device has finished the chain
    uchar status;                       // written by the device
  } info[VIRTQ_MAX];                    // indexed by head descriptor
  struct virtio_blk_req req[VIRTQ_MAX]; // headers, by head descriptor
} disk;

// The device's 64-bit register at off (two 32-bit reads, low word first).
static uint64
rd64(int off)
{
  return *R(off) | ((uint64)*R(off + 4) << 32);
}

// Feature negotiation: we need VERSION_1 and accept SEG_MAX and FLUSH.
// Returns the device's low feature word.
//
// Why FLUSH: without it QEMU must write through to the host's disk, which
// costs about 1.4 ms per request here instead of about 0.1 ms. With it,
// QEMU completes a write once the data is in the host's page cache, and
// virtio_disk_flush() asks for durability where the log needs it.
static uint32
negotiate(void)
{
  uint32 lo, hi;

  *R(VIRTIO_MMIO_DEVICE_FEATURES_SEL) = 0;
  lo = *R(VIRTIO_MMIO_DEVICE_FEATURES);
  *R(VIRTIO_MMIO_DEVICE_FEATURES_SEL) = 1;
  hi = *R(VIRTIO_MMIO_DEVICE_FEATURES);
  if (!(hi & (1 << (VIRTIO_F_VERSION_1 - 32))))
    panic("virtio_disk_init: device is not virtio 1.x");
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 0;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = lo & ((1 << VIRTIO_BLK_F_SEG_MAX) | (1 << VIRTIO_BLK_F_FLUSH));
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 1;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = 1 << (VIRTIO_F_VERSION_1 - 32);
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_FEATURES_OK;
  if (!(*R(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK))
    panic("virtio_disk_init: device refused our features");
  return lo;
}

// Allocates and registers queue 0.
static void
setup_queue(void)
{
  uint32 max;

  *R(VIRTIO_MMIO_QUEUE_SEL) = 0;
  if (*R(VIRTIO_MMIO_QUEUE_READY))
    panic("virtio_disk_init: queue already in use");
  max = *R(VIRTIO_MMIO_QUEUE_NUM_MAX);
  if (max < 4)
    panic("virtio_disk_init: queue too small");
  // A power of two, so that the 16-bit ring indexes wrap evenly.
  for (disk.num = VIRTQ_MAX; disk.num > max; disk.num /= 2)
    ;
  disk.desc = kalloc();
  disk.avail = kalloc();
  disk.used = kalloc();
  if (!disk.desc || !disk.avail || !disk.used)
    panic("virtio_disk_init: out of memory");
  memset(disk.desc, 0, PGSIZE);
  memset(disk.avail, 0, PGSIZE);
  memset(disk.used, 0, PGSIZE);
  *R(VIRTIO_MMIO_QUEUE_NUM) = disk.num;
  *R(VIRTIO_MMIO_QUEUE_DESC_LOW) = (uint64)disk.desc;
  *R(VIRTIO_MMIO_QUEUE_DESC_HIGH) = (uint64)disk.desc >> 32;
  *R(VIRTIO_MMIO_DRIVER_DESC_LOW) = (uint64)disk.avail;
  *R(VIRTIO_MMIO_DRIVER_DESC_HIGH) = (uint64)disk.avail >> 32;
  *R(VIRTIO_MMIO_DEVICE_DESC_LOW) = (uint64)disk.used;
  *R(VIRTIO_MMIO_DEVICE_DESC_HIGH) = (uint64)disk.used >> 32;
  *R(VIRTIO_MMIO_QUEUE_READY) = 1;
  for (disk.nfree = 0; disk.nfree < disk.num; disk.nfree++)
    disk.freelist[disk.nfree] = disk.nfree;
}

// Finds and initializes the disk. Called once on hart 0 at boot.
void
virtio_disk_init(void)
{
  uint32 features, segmax;

  initlock(&disk.lock, "virtio_disk");
  if (*R(VIRTIO_MMIO_MAGIC_VALUE) != VIRTIO_MAGIC || *R(VIRTIO_MMIO_VERSION) != 2 ||
      *R(VIRTIO_MMIO_DEVICE_ID) != VIRTIO_DEV_BLOCK)
    panic("virtio_disk_init: no modern virtio-blk disk at VIRTIO0 "
          "(QEMU needs -global virtio-mmio.force-legacy=false and a -drive)");
  *R(VIRTIO_MMIO_STATUS) = 0; // reset
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_ACKNOWLEDGE;
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER;
  features = negotiate();
#ifndef AISVC_NOFLUSH
  disk.flush = (features >> VIRTIO_BLK_F_FLUSH) & 1;
#endif
  setup_queue();
  disk.nblocks = rd64(VIRTIO_MMIO_CONFIG + VIRTIO_BLK_CFG_CAPACITY) / SECTORS_PER_BLOCK;
  // A request is header + data + status, and no chain may exceed the queue.
  disk.maxsegs = disk.num - 2;
  if (features & (1 << VIRTIO_BLK_F_SEG_MAX)) {
    segmax = *R(VIRTIO_MMIO_CONFIG + VIRTIO_BLK_CFG_SEG_MAX);
    if (segmax > 0 && segmax < disk.maxsegs)
      disk.maxsegs = segmax;
  }
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER_OK;
}

// The disk's capacity in blocks.
uint64
virtio_disk_capacity(void)
{
  return disk.nblocks;
}

// The most segments one virtio_disk_io() call may pass.
int
virtio_disk_maxsegs(void)
{
  return disk.maxsegs;
}

// Links descriptors d[0..nseg+1] into a request chain of the given type
// for (blockno, segs); nseg is 0 for a FLUSH. Caller holds disk.lock.
static void
fill_chain(uint16 *d, uint32 type, uint64 blockno, struct blkseg *segs, int nseg)
{
  struct virtio_blk_req *req = &disk.req[d[0]];
  int write = type != VIRTIO_BLK_T_IN;
  int i;

  req->type = type;
  req->reserved = 0;
  req->sector = blockno * SECTORS_PER_BLOCK;
  disk.desc[d[0]] = (struct virtq_desc){ (uint64)req, sizeof(*req), VRING_DESC_F_NEXT, d[1] };
  for (i = 0; i < nseg; i++) {
    // The device writes into memory on a read, and reads it on a write.
    disk.desc[d[1 + i]] = (struct virtq_desc){ segs[i].pa, segs[i].len,
      VRING_DESC_F_NEXT | (write ? 0 : VRING_DESC_F_WRITE), d[2 + i] };
  }
  disk.info[d[0]].status = 0xff;
  disk.info[d[0]].done = 0;
  disk.info[d[0]].inflight = 1;
  disk.desc[d[nseg + 1]] =
      (struct virtq_desc){ (uint64)&disk.info[d[0]].status, 1, VRING_DESC_F_WRITE, 0 };
}

// Queues a request of nseg + 2 descriptors and sleeps until the device
// has finished it. Returns the status byte. Caller holds no spinlock.
static int
submit(uint32 type, uint64 blockno, struct blkseg *segs, int nseg)
{
  uint16 d[VIRTQ_MAX];
  int i, head, status;

  acquire(&disk.lock);
  while (disk.nfree < nseg + 2) {
    disk.waiting++;
    sleep(&disk.nfree, &disk.lock);
    disk.waiting--;
  }
  for (i = 0; i < nseg + 2; i++)
    d[i] = disk.freelist[--disk.nfree];
  fill_chain(d, type, blockno, segs, nseg);
  head = d[0];

  disk.avail->ring[disk.avail->idx & (disk.num - 1)] = head;
  __sync_synchronize(); // the device must see the chain before the index
  disk.avail->idx++;
  __sync_synchronize();
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = 0;

  while (!disk.info[head].done)
    sleep(&disk.info[head], &disk.lock);
  status = disk.info[head].status;
  for (i = 0; i < nseg + 2; i++)
    disk.freelist[disk.nfree++] = d[i];
  if (disk.waiting)
    wakeup(&disk.nfree);
  release(&disk.lock);
  return status;
}

// Transfers segs[0..nseg) to (write) or from the disk, starting at block
// blockno, in one request, and sleeps until it is done. Each segment is
// physical memory. Returns 0, or -EIO if the device failed or the blocks
// lie beyond the disk. Caller holds no spinlock.
int
virtio_disk_io(uint64 blockno, struct blkseg *segs, int nseg, int write)
{
  uint64 bytes = 0;
  int i;

  if (nseg < 1 || nseg > disk.maxsegs)
    panic("virtio_disk_io: bad segment count");
  for (i = 0; i < nseg; i++)
    bytes += segs[i].len;
  if (blockno + (bytes + BSIZE - 1) / BSIZE > disk.nblocks)
    return -EIO;
  if (submit(write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN, blockno, segs, nseg) != VIRTIO_BLK_S_OK)
    return -EIO;
  return 0;
}

// Makes every write the device has completed durable (a FLUSH request),
// if the device caches writes. Returns 0 or -EIO.
int
virtio_disk_flush(void)
{
  if (!disk.flush)
    return 0;
  return submit(VIRTIO_BLK_T_FLUSH, 0, 0, 0) == VIRTIO_BLK_S_OK ? 0 : -EIO;
}

// Reads or writes one cached block. The buffer cache has no way to
// report an error, and our disk fails only when broken, so failure panics.
void
virtio_disk_rw(struct buf *b, int write)
{
  struct blkseg seg = { (uint64)b->data, BSIZE };

  if (virtio_disk_io(b->blockno, &seg, 1, write) < 0)
    panic("virtio_disk_rw: disk I/O error");
}

// Interrupt: marks finished requests done and wakes their owners. The
// used index is read from memory each time, as the device writes it, with
// the fence the virtio spec asks for before the entry is read. An entry
// naming a descriptor out of range, or a chain not in flight (returned
// twice), is ignored with one line: the device's word is not trusted.
void
virtio_disk_intr(void)
{
  uint32 id;

  acquire(&disk.lock);
  // Acknowledge first: a completion arriving while we scan raises a new
  // interrupt instead of being lost.
  *R(VIRTIO_MMIO_INTERRUPT_ACK) = *R(VIRTIO_MMIO_INTERRUPT_STATUS) & 0x3;
  __sync_synchronize();
  while (disk.used_idx != *(volatile uint16 *)&disk.used->idx) {
    __sync_synchronize();
    id = ((volatile struct virtq_used_elem *)disk.used->ring)[disk.used_idx++ & (disk.num - 1)].id;
    if (id >= (uint32)disk.num || !disk.info[id].inflight) {
      printf("virtio_disk: the device returned chain %u, not in flight; ignored\n", id);
      continue;
    }
    disk.info[id].inflight = 0;
    disk.info[id].done = 1;
    wakeup(&disk.info[id]);
  }
  release(&disk.lock);
}
