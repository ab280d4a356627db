// Driver for the virtio console device (QEMU's virtio-serial-device), the
// gateway's channel to the host (docs/GATEWAY.md): one port on the second
// virtio-mmio transport (VIRTIO1), modern virtio-mmio (version 2), seen by
// user programs as the PORT device (the file /port that init makes).
//
// We accept no feature but VERSION_1, so the device has one port and two
// split virtqueues (virtio 1.1, section 5.3): receiveq (queue 0), whose
// buffers the device fills with bytes from the host, and transmitq
// (queue 1), whose buffers it sends to the host. The device has no
// framing: bytes are a stream, as on a pipe.
//
// Receiving. PORT_NBUF pages are posted to receiveq at init, one
// device-writable descriptor each (descriptor i is page i). The
// interrupt handler appends every filled buffer to rx.filled in the order
// the device returned it; a reader copies out from the oldest filled
// buffer on, across buffers, and posts each buffer it emptied again. A
// read sleeps while nothing has arrived, then returns what there is (at
// least one byte, at most n), like a pipe. The host's bytes are never
// dropped: when every buffer is full the device leaves the rest in the
// host's socket until a reader frees one.
//
// Sending. A write copies its bytes into free transmit pages (descriptor
// i of transmitq is page i), posts them, and sleeps until the device has
// returned every posted page, i.e. taken the bytes. Writers take turns
// (tx.busy), so the bytes of one write are never interleaved with
// another's. A kill interrupts a read or write that sleeps: it returns
// -EINTR (a write's pages already posted still go out).
//
// Locking: port.lock guards everything below "guarded by lock"; the
// interrupt may arrive on any hart, and readers and writers on the
// others. Buffer pages are kernel memory mapped 1:1, so their virtual
// address is the physical one the device needs.
//
// Without the device (QEMU started without a port) virtio_port_init finds
// nothing at VIRTIO1 and leaves devsw[PORT] empty: open("/port") then
// fails with -ENXIO, and the system runs as without this driver.

#include "types.h"
#include "param.h"
#include "memlayout.h"
#include "spinlock.h"
#include "sleeplock.h"
#include "riscv.h"
#include "defs.h"
#include "errno.h"
#include "fs.h"
#include "file.h"
#include "proc.h"
#include "virtio.h"

#define R(r) ((volatile uint32 *)(VIRTIO1 + (r)))

#define PORT_NBUF 16 // pages per queue (a power of two: the queue size)
#define RXQ       0  // receiveq0
#define TXQ       1  // transmitq0

// One split virtqueue whose descriptor i always points at page buf[i].
struct queue {
  struct virtq_desc *desc;
  struct virtq_avail *avail;
  struct virtq_used *used;
  char *buf[PORT_NBUF];
  uint16 used_idx; // next used-ring entry to look at; guarded by lock
};

static struct port {
  struct spinlock lock;
  struct queue rxq, txq;
  // guarded by lock:
  struct {
    uint16 filled[PORT_NBUF]; // buffers with data, oldest first (a ring)
    uint32 len[PORT_NBUF];    // bytes the device wrote, by buffer
    uint nfilled;             // entries in filled from head on
    uint head;                // the oldest filled buffer (index into filled)
    uint off;                 // bytes of it already read
  } rx;
  struct {
    uint16 freelist[PORT_NBUF]; // free transmit buffers (a stack)
    int nfree;
    int busy; // a writer is posting or waiting for its bytes
  } tx;
} port;

// Allocates queue q's rings and pages and registers it as queue number
// qsel. Returns 0, or -1 when the device cannot take PORT_NBUF entries.
static int
setup_queue(struct queue *q, int qsel)
{
  *R(VIRTIO_MMIO_QUEUE_SEL) = qsel;
  if (*R(VIRTIO_MMIO_QUEUE_READY) || *R(VIRTIO_MMIO_QUEUE_NUM_MAX) < PORT_NBUF)
    return -1;
  q->desc = kalloc();
  q->avail = kalloc();
  q->used = kalloc();
  if (!q->desc || !q->avail || !q->used)
    panic("virtio_port_init: out of memory");
  memset(q->desc, 0, PGSIZE);
  memset(q->avail, 0, PGSIZE);
  memset(q->used, 0, PGSIZE);
  for (int i = 0; i < PORT_NBUF; i++) {
    if ((q->buf[i] = kalloc()) == 0)
      panic("virtio_port_init: out of memory");
    q->desc[i] = (struct virtq_desc){ (uint64)q->buf[i], PGSIZE, qsel == RXQ ? VRING_DESC_F_WRITE : 0, 0 };
  }
  *R(VIRTIO_MMIO_QUEUE_NUM) = PORT_NBUF;
  *R(VIRTIO_MMIO_QUEUE_DESC_LOW) = (uint64)q->desc;
  *R(VIRTIO_MMIO_QUEUE_DESC_HIGH) = (uint64)q->desc >> 32;
  *R(VIRTIO_MMIO_DRIVER_DESC_LOW) = (uint64)q->avail;
  *R(VIRTIO_MMIO_DRIVER_DESC_HIGH) = (uint64)q->avail >> 32;
  *R(VIRTIO_MMIO_DEVICE_DESC_LOW) = (uint64)q->used;
  *R(VIRTIO_MMIO_DEVICE_DESC_HIGH) = (uint64)q->used >> 32;
  *R(VIRTIO_MMIO_QUEUE_READY) = 1;
  return 0;
}

// Hands buffer i of queue q (descriptor i, len bytes) to the device.
// The caller notifies the device afterwards. Caller holds port.lock.
static void
post(struct queue *q, int i, uint32 len)
{
  q->desc[i].len = len;
  q->avail->ring[q->avail->idx & (PORT_NBUF - 1)] = i;
  __sync_synchronize(); // the device must see the entry before the index
  q->avail->idx++;
  __sync_synchronize();
}

static int portread(int user_dst, uint64 dst, int n);
static int portwrite(int user_src, uint64 src, int n);

// Finds the port device at VIRTIO1 and sets it up, with every receive
// buffer posted. Without one, does nothing. Called once on hart 0 at boot.
void
virtio_port_init(void)
{
  initlock(&port.lock, "virtio_port");
  if (*R(VIRTIO_MMIO_MAGIC_VALUE) != VIRTIO_MAGIC || *R(VIRTIO_MMIO_VERSION) != 2 ||
      *R(VIRTIO_MMIO_DEVICE_ID) != VIRTIO_DEV_CONSOLE)
    return;
  *R(VIRTIO_MMIO_STATUS) = 0; // reset
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_ACKNOWLEDGE;
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER;
  *R(VIRTIO_MMIO_DEVICE_FEATURES_SEL) = 1;
  if (!(*R(VIRTIO_MMIO_DEVICE_FEATURES) & (1 << (VIRTIO_F_VERSION_1 - 32))))
    goto fail;
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 0;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = 0; // no size, no multiport, no emergency write
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 1;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = 1 << (VIRTIO_F_VERSION_1 - 32);
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_FEATURES_OK;
  if (!(*R(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK))
    goto fail;
  if (setup_queue(&port.rxq, RXQ) < 0 || setup_queue(&port.txq, TXQ) < 0)
    goto fail;
  for (int i = 0; i < PORT_NBUF; i++) {
    post(&port.rxq, i, PGSIZE);
    port.tx.freelist[port.tx.nfree++] = i;
  }
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER_OK;
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = RXQ;
  devsw[PORT].read = portread;
  devsw[PORT].write = portwrite;
  return;
fail:
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_FAILED;
  printf("virtio_port_init: the console device at VIRTIO1 is unusable; no /port\n");
}

// The PORT device's read: up to n bytes into dst (a user address if
// user_dst), at least one; sleeps until the host has sent some. Returns
// the count, -EINTR if the process is killed while waiting, or -EFAULT
// if dst is bad before any byte was copied.
static int
portread(int user_dst, uint64 dst, int n)
{
  int got = 0, reposted = 0;

  acquire(&port.lock);
  while (port.rx.nfilled == 0) {
    if (killed(myproc())) {
      release(&port.lock);
      return -EINTR;
    }
    sleep(&port.rx, &port.lock);
  }
  while (got < n && port.rx.nfilled > 0) {
    int b = port.rx.filled[port.rx.head];
    int m = port.rx.len[b] - port.rx.off;
    if (m > n - got)
      m = n - got;
    if (either_copyout(user_dst, dst + got, port.rxq.buf[b] + port.rx.off, m) < 0) {
      if (got == 0)
        got = -EFAULT;
      break;
    }
    got += m;
    port.rx.off += m;
    if (port.rx.off == port.rx.len[b]) {
      port.rx.head = (port.rx.head + 1) % PORT_NBUF;
      port.rx.nfilled--;
      port.rx.off = 0;
      post(&port.rxq, b, PGSIZE);
      reposted = 1;
    }
  }
  if (reposted)
    *R(VIRTIO_MMIO_QUEUE_NOTIFY) = RXQ;
  release(&port.lock);
  return got;
}

// Copies up to a page of src into a free transmit buffer and posts it,
// sleeping while none is free. Returns the bytes posted, -EINTR if
// killed while waiting, or -EFAULT. Caller holds port.lock.
static int
send_chunk(int user_src, uint64 src, int n)
{
  int b;

  while (port.tx.nfree == 0) {
    if (killed(myproc()))
      return -EINTR;
    sleep(&port.tx, &port.lock);
  }
  b = port.tx.freelist[port.tx.nfree - 1];
  if (n > PGSIZE)
    n = PGSIZE;
  if (either_copyin(port.txq.buf[b], user_src, src, n) < 0)
    return -EFAULT;
  port.tx.nfree--;
  post(&port.txq, b, n);
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = TXQ;
  return n;
}

// The PORT device's write: n bytes from src (a user address if
// user_src). Sleeps until the device has taken them all. Returns n,
// -EINTR if killed while waiting, or -EFAULT if src is bad (bytes before
// the bad address may have been sent).
static int
portwrite(int user_src, uint64 src, int n)
{
  int done = 0, r = 0;

  acquire(&port.lock);
  while (port.tx.busy) {
    if (killed(myproc())) {
      release(&port.lock);
      return -EINTR;
    }
    sleep(&port.tx.busy, &port.lock);
  }
  port.tx.busy = 1;
  while (done < n && (r = send_chunk(user_src, src + done, n - done)) > 0)
    done += r;
  while (r >= 0 && port.tx.nfree < PORT_NBUF) {
    if (killed(myproc())) {
      r = -EINTR;
      break;
    }
    sleep(&port.tx, &port.lock);
  }
  port.tx.busy = 0;
  wakeup(&port.tx.busy);
  release(&port.lock);
  return r < 0 ? r : done;
}

// Interrupt: collects filled receive buffers and returned transmit
// buffers, and wakes the readers and writers waiting for them.
void
virtio_port_intr(void)
{
  acquire(&port.lock);
  // Acknowledge first: a buffer returned while we scan raises a new
  // interrupt instead of being lost.
  *R(VIRTIO_MMIO_INTERRUPT_ACK) = *R(VIRTIO_MMIO_INTERRUPT_STATUS) & 0x3;
  __sync_synchronize();
  while (port.rxq.used_idx != port.rxq.used->idx) {
    __sync_synchronize();
    struct virtq_used_elem *e = &port.rxq.used->ring[port.rxq.used_idx++ & (PORT_NBUF - 1)];
    if (e->id >= PORT_NBUF)
      panic("virtio_port_intr: the device returned a buffer we never posted");
    if (e->len == 0) { // nothing in it: give it straight back
      post(&port.rxq, e->id, PGSIZE);
      *R(VIRTIO_MMIO_QUEUE_NOTIFY) = RXQ;
      continue;
    }
    port.rx.len[e->id] = e->len < PGSIZE ? e->len : PGSIZE;
    port.rx.filled[(port.rx.head + port.rx.nfilled++) % PORT_NBUF] = e->id;
    wakeup(&port.rx);
  }
  while (port.txq.used_idx != port.txq.used->idx) {
    __sync_synchronize();
    uint32 id = port.txq.used->ring[port.txq.used_idx++ & (PORT_NBUF - 1)].id;
    if (id >= PORT_NBUF || port.tx.nfree == PORT_NBUF)
      panic("virtio_port_intr: the device returned a buffer we never posted");
    port.tx.freelist[port.tx.nfree++] = id;
    wakeup(&port.tx);
  }
  release(&port.lock);
}
