// gateway.h: the gateway channel's framing (docs/GATEWAY.md), the one
// place it is written down: user/ai/gateway.c includes it and the host
// reads it (pyaisvc/serve/frames.py, with pyaisvc.cheader). The limits of
// one request (prompt, predict, stop ids, the table's slots) are the
// kernel's, in kernel/include/aisvc.h.

#ifndef AISVC_GATEWAY_H
#define AISVC_GATEWAY_H

#include "kernel/include/aisvc.h"

#define GW_VERSION   5                   // the protocol's version, in the R frame
#define GW_LINE_MAX  4096                // longest frame, newline included
#define GW_RID_MAX   2147483647          // the host's rids run 1..GW_RID_MAX (2^31-1)
#define GW_NONCE_MAX 9223372036854775807 // a hello's nonce: 0..GW_NONCE_MAX (2^63-1)
#define GW_LIVE_MAX  AI_NSLOT            // requests the gateway holds live at once

// The gateway's own codes in X frames; every other code is the kernel's AIE_*.
#define GW_MALFORMED 200 // the frame is not exactly right
#define GW_RID_LIVE  201 // S with a rid that is live (that request goes on)
#define GW_FULL      202 // S while the gateway holds GW_LIVE_MAX live requests
#define GW_NOT_LIVE  203 // C for a rid that is not live

// The S frame's words, in their order (docs/GATEWAY.md): "S" and the 8
// numbers rid predict temp_micro top_k top_p_micro seed tenant priority;
// nstop and as many stop ids; the 4 numbers presence_micro
// frequency_micro logprobs nbias and nbias pairs (id micro); nprompt and
// as many prompt ids. The longest legal one has GW_S_WORDS_MAX words.
#define GW_S_HEAD   9 // "S" and the 8 numbers before nstop
#define GW_S_ADJUST 4 // presence_micro .. nbias
#define GW_S_WORDS_MAX \
  (GW_S_HEAD + 1 + AI_MAX_STOP + GW_S_ADJUST + 2 * AI_MAX_BIAS + 1 + AI_MAX_PROMPT)

#define GW_STR_(x) #x
#define GW_STR(x)  GW_STR_(x) // a number above as text, e.g. "4096"

#endif
