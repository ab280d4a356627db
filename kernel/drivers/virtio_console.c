// Driver for the virtio console device (QEMU's virtio-serial-device), the
// gateway's channel to the host (docs/GATEWAY.md): one port on the second
// virtio-mmio transport (VIRTIO1), modern virtio-mmio (version 2), seen by
// user programs as the PORT device (the file /port that init makes).
//
// The port's two split virtqueues (virtio 1.1, section 5.3): a receiveq,
// whose buffers the device fills with bytes from the host, and a
// transmitq, whose buffers it sends to the host. The device has no
// framing: bytes are a stream, as on a pipe. Which port, and so which
// queues:
//   - with MULTIPORT (QEMU offers it), the device announces its ports on
//     the control queues (2 and 3) after we say DEVICE_READY; we take the
//     first port it adds (id 0 or 1), answer PORT_READY, and open it
//     (PORT_OPEN, so the host sees the guest connected). Port 0's queues
//     are 0 and 1, port 1's 4 and 5. This handshake runs once, at boot,
//     before interrupts are on, so init waits for the device's answers
//     (PORT_HELLO_US after each of at most PORT_HELLOS DEVICE_READYs:
//     see ctrl_hello); afterwards the interrupt only gives the
//     control buffers back. QEMU's `virtserialport` (port 1 here) holds
//     the guest back while the host's socket is full; its `virtconsole`
//     (always port 0) drops what the socket cannot take (docs/GATEWAY.md).
//   - without MULTIPORT, port 0 alone, on queues 0 and 1.
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
// Opening. One process opens the port at a time, the gateway: while its
// open file exists (shared by fork and dup), open("/port") elsewhere fails
// with -EBUSY, so no other process reads the host's frames or forges its
// own. The open ends when the last reference to that file is closed (or
// its process exits).
//
// Sending. A write copies its bytes into free transmit pages (descriptor
// i of transmitq is page i), posts them, and sleeps until the device has
// returned every posted page, i.e. taken the bytes. Writers take turns
// (tx.busy), so the bytes of one write are never interleaved with
// another's. A kill interrupts a read or write that sleeps: it returns
// -EINTR (a write's pages already posted still go out).
//
// The device's word is checked: its used index is read from memory each
// time (it changes under us), and a used-ring entry that names a buffer
// out of range, or one the device does not hold (returned twice), is
// ignored with one kernel line (used_next).
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

#define PORT_NBUF     16    // pages per queue (a power of two: the queue size)
#define PORT_HELLO_US 50000 // the wait for the device's answer to DEVICE_READY
#define PORT_HELLOS   8     // DEVICE_READY sent at most this often
#define CTRL_RXQ      2     // control receiveq (MULTIPORT)
#define CTRL_TXQ      3     // control transmitq
#define PORT_RXQ(id)  ((id) == 0 ? 0 : 2 * (id) + 2)
#define PORT_TXQ(id)  (PORT_RXQ(id) + 1)

// Control messages (MULTIPORT), virtio 1.1 section 5.3.6.2.
struct virtio_console_control {
  uint32 id; // port number
  uint16 event;
  uint16 value;
};
#define VIRTIO_CONSOLE_DEVICE_READY 0
#define VIRTIO_CONSOLE_DEVICE_ADD   1
#define VIRTIO_CONSOLE_PORT_READY   3
#define VIRTIO_CONSOLE_PORT_OPEN    6
#define CTRL_BUF                    64 // a control message, with room for a port name

// One split virtqueue whose descriptor i always points at buffer buf[i].
struct queue {
  int qsel; // its number on the device
  struct virtq_desc *desc;
  struct virtq_avail *avail;
  struct virtq_used *used;
  char *buf[PORT_NBUF];
  uint16 used_idx; // next used-ring entry to look at; guarded by lock
  uint32 posted;   // bit i: buffer i is the device's (posted, not yet used); guarded by lock
};

static struct port {
  struct spinlock lock;
  struct queue rxq, txq;      // the port's
  struct queue ctrlq, ctrltq; // control receive and transmit (MULTIPORT)
  int multiport;
  // guarded by lock:
  int opened; // an open file of the port exists (one at a time)
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

// Allocates queue q's rings and its buffers (a page each, or CTRL_BUF
// bytes of one page for a control queue), the device writing them if rx,
// and registers it as queue number qsel. Returns 0, or -1 when the device
// cannot take PORT_NBUF entries.
static int
setup_queue(struct queue *q, int qsel, int rx, int ctrl)
{
  char *page = 0;

  q->qsel = qsel;
  *R(VIRTIO_MMIO_QUEUE_SEL) = qsel;
  if (*R(VIRTIO_MMIO_QUEUE_READY) || *R(VIRTIO_MMIO_QUEUE_NUM_MAX) < PORT_NBUF)
    return -1;
  q->desc = kalloc();
  q->avail = kalloc();
  q->used = kalloc();
  if (ctrl)
    page = kalloc();
  if (!q->desc || !q->avail || !q->used || (ctrl && !page))
    panic("virtio_port_init: out of memory");
  memset(q->desc, 0, PGSIZE);
  memset(q->avail, 0, PGSIZE);
  memset(q->used, 0, PGSIZE);
  for (int i = 0; i < PORT_NBUF; i++) {
    q->buf[i] = ctrl ? page + i * CTRL_BUF : kalloc();
    if (q->buf[i] == 0)
      panic("virtio_port_init: out of memory");
    q->desc[i] = (struct virtq_desc){ (uint64)q->buf[i], ctrl ? CTRL_BUF : PGSIZE,
      rx ? VRING_DESC_F_WRITE : 0, 0 };
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
  q->posted |= 1u << i;
  q->desc[i].len = len;
  q->avail->ring[q->avail->idx & (PORT_NBUF - 1)] = i;
  __sync_synchronize(); // the device must see the entry before the index
  q->avail->idx++;
  __sync_synchronize();
}

// Takes the next entry of q's used ring, if the device has returned one:
// returns its buffer number and sets *len (if len) to the bytes it wrote,
// or returns -1 when the ring holds nothing new. The used index is read
// from memory each time, as the device writes it, and the fence the
// virtio spec asks for orders that read before the entry's. An entry
// naming a buffer out of range, or one that is not the device's (returned
// twice), is skipped with one line: the device's word is not trusted.
// Caller holds port.lock (or is init, before interrupts are on).
static int
used_next(struct queue *q, uint32 *len)
{
  while (q->used_idx != *(volatile uint16 *)&q->used->idx) {
    __sync_synchronize();
    volatile struct virtq_used_elem *e = &q->used->ring[q->used_idx++ & (PORT_NBUF - 1)];
    uint32 id = e->id;
    if (id >= PORT_NBUF || !(q->posted & (1u << id))) {
      printf("virtio_port: queue %d: the device returned buffer %u, not its own; ignored\n",
          q->qsel, id);
      continue;
    }
    q->posted &= ~(1u << id);
    if (len)
      *len = e->len;
    return id;
  }
  return -1;
}

static int portread(int user_dst, uint64 dst, int n);
static int portwrite(int user_src, uint64 src, int n);
static int portopen(void);
static void portclose(void);

// Boot only: sends control message (id, event, value) in buffer i of the
// control transmitq (each message of the handshake has its own: 0
// PORT_READY, 1 PORT_OPEN, 2 and up the DEVICE_READYs).
static void
ctrl_send(int i, uint32 id, uint16 event, uint16 value)
{
  *(struct virtio_console_control *)port.ctrltq.buf[i] =
      (struct virtio_console_control){ id, event, value };
  post(&port.ctrltq, i, sizeof(struct virtio_console_control));
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = CTRL_TXQ;
}

// Boot only: waits for the device's next control message, copies it to
// *m and gives its buffer back. Returns 0, or -1 after PORT_HELLO_US.
static int
ctrl_next(struct virtio_console_control *m)
{
  uint64 end = r_time() + (uint64)PORT_HELLO_US * (TIMEBASE_HZ / 1000000);
  int b;

  while ((b = used_next(&port.ctrlq, 0)) < 0)
    if (r_time() > end)
      return -1;
  *m = *(struct virtio_console_control *)port.ctrlq.buf[b];
  post(&port.ctrlq, b, CTRL_BUF);
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = CTRL_RXQ;
  return 0;
}

// Boot only, MULTIPORT: posts the control receive buffers, says
// DEVICE_READY and waits for the first port the device adds. Returns its
// id (0 or 1), or -1. QEMU at 2 harts and more now and then takes the
// first DEVICE_READY but announces no port; it does on a second one, so
// the message is repeated after PORT_HELLO_US without an answer.
static int
ctrl_hello(void)
{
  struct virtio_console_control m;

  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER_OK;
  for (int i = 0; i < PORT_NBUF; i++)
    post(&port.ctrlq, i, CTRL_BUF);
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = CTRL_RXQ;
  for (int try = 0; try < PORT_HELLOS; try++) {
    ctrl_send(2 + try, 0, VIRTIO_CONSOLE_DEVICE_READY, 1);
    while (ctrl_next(&m) == 0)
      if (m.event == VIRTIO_CONSOLE_DEVICE_ADD && m.id <= 1)
        return m.id;
  }
  return -1;
}

// Feature negotiation: VERSION_1, and MULTIPORT when offered. Returns 1
// with MULTIPORT, 0 without, -1 if the device is not virtio 1.x or
// refuses.
static int
negotiate(void)
{
  uint32 lo;

  *R(VIRTIO_MMIO_DEVICE_FEATURES_SEL) = 0;
  lo = *R(VIRTIO_MMIO_DEVICE_FEATURES) & (1 << VIRTIO_CONSOLE_F_MULTIPORT);
  *R(VIRTIO_MMIO_DEVICE_FEATURES_SEL) = 1;
  if (!(*R(VIRTIO_MMIO_DEVICE_FEATURES) & (1 << (VIRTIO_F_VERSION_1 - 32))))
    return -1;
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 0;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = lo;
  *R(VIRTIO_MMIO_DRIVER_FEATURES_SEL) = 1;
  *R(VIRTIO_MMIO_DRIVER_FEATURES) = 1 << (VIRTIO_F_VERSION_1 - 32);
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_FEATURES_OK;
  if (!(*R(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK))
    return -1;
  return lo != 0;
}

// Finds the port device at VIRTIO1 and sets it up, with every receive
// buffer posted. Without one, does nothing. Called once on hart 0 at boot,
// before interrupts are on.
void
virtio_port_init(void)
{
  int id = 0;

  initlock(&port.lock, "virtio_port");
  if (*R(VIRTIO_MMIO_MAGIC_VALUE) != VIRTIO_MAGIC || *R(VIRTIO_MMIO_VERSION) != 2 ||
      *R(VIRTIO_MMIO_DEVICE_ID) != VIRTIO_DEV_CONSOLE)
    return;
  *R(VIRTIO_MMIO_STATUS) = 0; // reset
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_ACKNOWLEDGE;
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER;
  if ((port.multiport = negotiate()) < 0)
    goto fail;
  if (port.multiport) {
    if (setup_queue(&port.ctrlq, CTRL_RXQ, 1, 1) < 0 ||
        setup_queue(&port.ctrltq, CTRL_TXQ, 0, 1) < 0 || (id = ctrl_hello()) < 0)
      goto fail;
  }
  if (setup_queue(&port.rxq, PORT_RXQ(id), 1, 0) < 0 ||
      setup_queue(&port.txq, PORT_TXQ(id), 0, 0) < 0)
    goto fail;
  for (int i = 0; i < PORT_NBUF; i++) {
    post(&port.rxq, i, PGSIZE);
    port.tx.freelist[port.tx.nfree++] = i;
  }
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_DRIVER_OK;
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = port.rxq.qsel;
  if (port.multiport) {
    ctrl_send(0, id, VIRTIO_CONSOLE_PORT_READY, 1);
    ctrl_send(1, id, VIRTIO_CONSOLE_PORT_OPEN, 1);
  }
  devsw[PORT].read = portread;
  devsw[PORT].write = portwrite;
  devsw[PORT].open = portopen;
  devsw[PORT].close = portclose;
  return;
fail:
  *R(VIRTIO_MMIO_STATUS) |= VIRTIO_STATUS_FAILED;
  printf("virtio_port_init: the console device at VIRTIO1 is unusable; no /port\n");
}

// The PORT device's open: one open file of the port at a time, the
// gateway's (descriptors that fork or dup share it are the same open).
// Returns 0, or -EBUSY while another is open.
static int
portopen(void)
{
  int r = 0;

  acquire(&port.lock);
  if (port.opened)
    r = -EBUSY;
  else
    port.opened = 1;
  release(&port.lock);
  return r;
}

// The PORT device's close, when the last reference to its open file
// goes: the next open may come. Bytes the host sent and no one read stay
// for the next reader.
static void
portclose(void)
{
  acquire(&port.lock);
  port.opened = 0;
  release(&port.lock);
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
    *R(VIRTIO_MMIO_QUEUE_NOTIFY) = port.rxq.qsel;
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
  *R(VIRTIO_MMIO_QUEUE_NOTIFY) = port.txq.qsel;
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

// Gives every control message the device sent since boot back unread
// (the port stays as the handshake left it), and forgets the control
// buffers it returned. Caller holds port.lock.
static void
ctrl_drain(void)
{
  int b;

  while ((b = used_next(&port.ctrlq, 0)) >= 0) {
    post(&port.ctrlq, b, CTRL_BUF);
    *R(VIRTIO_MMIO_QUEUE_NOTIFY) = CTRL_RXQ;
  }
  while (used_next(&port.ctrltq, 0) >= 0)
    ;
}

// Interrupt: collects filled receive buffers and returned transmit
// buffers, and wakes the readers and writers waiting for them.
void
virtio_port_intr(void)
{
  uint32 len;
  int b;

  acquire(&port.lock);
  // Acknowledge first: a buffer returned while we scan raises a new
  // interrupt instead of being lost.
  *R(VIRTIO_MMIO_INTERRUPT_ACK) = *R(VIRTIO_MMIO_INTERRUPT_STATUS) & 0x3;
  __sync_synchronize();
  if (port.rxq.used == 0) { // the device failed at init
    release(&port.lock);
    return;
  }
  if (port.multiport)
    ctrl_drain();
  while ((b = used_next(&port.rxq, &len)) >= 0) {
    if (len == 0) { // nothing in it: give it straight back
      post(&port.rxq, b, PGSIZE);
      *R(VIRTIO_MMIO_QUEUE_NOTIFY) = port.rxq.qsel;
      continue;
    }
    port.rx.len[b] = len < PGSIZE ? len : PGSIZE;
    port.rx.filled[(port.rx.head + port.rx.nfilled++) % PORT_NBUF] = b;
    wakeup(&port.rx);
  }
  while ((b = used_next(&port.txq, 0)) >= 0) {
    port.tx.freelist[port.tx.nfree++] = b;
    wakeup(&port.tx);
  }
  release(&port.lock);
}
