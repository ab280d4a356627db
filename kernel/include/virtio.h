// virtio over MMIO, version 2 ("modern"), and the virtio-blk device:
// register offsets, status and feature bits, the split virtqueue layout
// and the block request header. Facts from the virtio 1.1 specification
// (sections 2.6 split virtqueues, 4.2.2 MMIO registers, 5.2 block device).
#ifndef AISVC_VIRTIO_H
#define AISVC_VIRTIO_H

// MMIO registers, byte offsets from the device's base address.
#define VIRTIO_MMIO_MAGIC_VALUE         0x000 // 0x74726976 ("virt")
#define VIRTIO_MMIO_VERSION             0x004 // 2 for modern devices
#define VIRTIO_MMIO_DEVICE_ID           0x008 // 2 is a block device
#define VIRTIO_MMIO_VENDOR_ID           0x00c
#define VIRTIO_MMIO_DEVICE_FEATURES     0x010
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL 0x014
#define VIRTIO_MMIO_DRIVER_FEATURES     0x020
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL 0x024
#define VIRTIO_MMIO_QUEUE_SEL           0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX       0x034
#define VIRTIO_MMIO_QUEUE_NUM           0x038
#define VIRTIO_MMIO_QUEUE_READY         0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY        0x050
#define VIRTIO_MMIO_INTERRUPT_STATUS    0x060
#define VIRTIO_MMIO_INTERRUPT_ACK       0x064
#define VIRTIO_MMIO_STATUS              0x070
#define VIRTIO_MMIO_QUEUE_DESC_LOW      0x080
#define VIRTIO_MMIO_QUEUE_DESC_HIGH     0x084
#define VIRTIO_MMIO_DRIVER_DESC_LOW     0x090 // the available ring
#define VIRTIO_MMIO_DRIVER_DESC_HIGH    0x094
#define VIRTIO_MMIO_DEVICE_DESC_LOW     0x0a0 // the used ring
#define VIRTIO_MMIO_DEVICE_DESC_HIGH    0x0a4
#define VIRTIO_MMIO_CONFIG              0x100 // device-specific

#define VIRTIO_MAGIC       0x74726976
#define VIRTIO_DEV_BLOCK   2
#define VIRTIO_DEV_CONSOLE 3

// Device status bits.
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER      2
#define VIRTIO_STATUS_DRIVER_OK   4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_FAILED      128

// Feature bits. Bits 32 and up are read with DEVICE_FEATURES_SEL = 1.
#define VIRTIO_BLK_F_SEG_MAX 2  // config.seg_max is valid
#define VIRTIO_BLK_F_RO      5  // the disk is read-only
#define VIRTIO_BLK_F_FLUSH   9  // the device may cache writes (FLUSH)
#define VIRTIO_F_VERSION_1   32 // a modern device; must be accepted

#define VIRTIO_CONSOLE_F_MULTIPORT 1 // ports announced on control queues

// Block device configuration (at VIRTIO_MMIO_CONFIG).
#define VIRTIO_BLK_CFG_CAPACITY 0x00 // 64-bit, in 512-byte sectors
#define VIRTIO_BLK_CFG_SEG_MAX  0x0c // most data descriptors per request

// Split virtqueue. The driver allocates the three parts; each here gets a
// page of its own, which meets the 16/2/4-byte alignment rules.
#define VIRTQ_MAX 256 // descriptors we use at most (QEMU offers 256)

#define VRING_DESC_F_NEXT  1 // chained with the descriptor in next
#define VRING_DESC_F_WRITE 2 // the device writes (vs reads) the buffer

struct virtq_desc {
  uint64 addr; // guest physical address
  uint32 len;
  uint16 flags;
  uint16 next;
};

struct virtq_avail {
  uint16 flags;
  uint16 idx; // where the driver puts the next entry, modulo queue size
  uint16 ring[VIRTQ_MAX];
  uint16 unused;
};

struct virtq_used_elem {
  uint32 id; // head descriptor of a finished chain
  uint32 len;
};

struct virtq_used {
  uint16 flags;
  uint16 idx; // where the device puts the next entry
  struct virtq_used_elem ring[VIRTQ_MAX];
};

// Block request: header (device reads), data, status byte (device writes).
#define VIRTIO_BLK_T_IN    0 // read from the disk
#define VIRTIO_BLK_T_OUT   1 // write to the disk
#define VIRTIO_BLK_T_FLUSH 4 // make completed writes durable
#define VIRTIO_BLK_S_OK    0

struct virtio_blk_req {
  uint32 type;
  uint32 reserved;
  uint64 sector; // in 512-byte units, whatever the block size
};

#endif
