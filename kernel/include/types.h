// Fixed-width integer types for kernel and user code.
#ifndef AISVC_TYPES_H
#define AISVC_TYPES_H

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;

typedef unsigned char uint8;
typedef unsigned short uint16;
typedef unsigned int uint32;
typedef unsigned long uint64;
typedef signed char int8;
typedef short int16;
typedef int int32;
typedef long int64;

#endif
