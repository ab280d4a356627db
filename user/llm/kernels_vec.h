// Which matmul kernels the LLM runtime uses, and the RVV ones
// (user/llm/kernels_vec.c, user/llm/kernels_rvv.S).
//
// The choice is made once per process, before the model loads
// (llm_kernels_select, the CLI's --kernels): "scalar" (kernels.c), "vector"
// (RVV 1.0, the machine must have it), or "auto" (the default: vector when
// the machine has V with 128- to 512-bit registers). With vector kernels,
// the loader repacks every weight matrix in place (llm_vec_pack), and
// llm_matmul hands the packed rows to llm_vec_matmul; the rows left over
// (and all rows with scalar kernels) are stored offset by 128 for the
// scalar kernels (llm_qmat_offset). Both paths compute the same integers,
// so their tokens are identical. The vector choice also runs the Gated
// DeltaNet's state update on RVV (llm_vec_delta_step), with the scalar
// code's float operations in the same order.
#ifndef AISVC_LLM_KERNELS_VEC_H
#define AISVC_LLM_KERNELS_VEC_H

#include "user/llm/kernels.h"

// Sets the choice from "auto", "scalar" or "vector". Returns 0, or -1
// after a message starting with prog (an unknown name, or vector on a
// machine without V).
int llm_kernels_select(const char *prog, const char *name);

// "scalar" or "vector": what this process runs (decides "auto").
const char *llm_kernels_name(void);
// 1 when that is "vector".
int llm_kernels_vector(void);

// The rows per packed block of the kernels this process runs: 16 or 32
// with vector kernels, 0 with scalar ones (whose rows are all row-major).
// Asset format version 4 stores the weights in this layout for one block
// size (docs/ASSET_FORMAT.md), so the loader can map them in place.
int llm_vec_block(void);

// Turns rows x cols weights q in version 4's layout for blocks of B rows
// (0: none; every weight offset by 128) back into plain row-major int8s,
// in place. Returns 0, or -1 when out of memory.
int llm_vec_unpack(int8 *q, int rows, int cols, int B);

// With vector kernels, the bytes llm_vec_pack needs for m's multipliers;
// 0 when m stays as it is (scalar kernels, or fewer rows than a block).
uint64 llm_vec_wm_bytes(const struct llm_qmat *m);

// Repacks m's weights for the vector kernels (m->vrows rows, a multiple of
// the block size; the rest stay row-major), with the multipliers in vwm
// (llm_vec_wm_bytes(m) bytes, which stay m's). Returns 0, or -1 when out
// of memory (the caller says so).
int llm_vec_pack(struct llm_qmat *m, int32 *vwm);

// y[p][r] = (W x_p)_r for the packed rows r in [lo, hi), r < w->vrows. A
// block that the range cuts is computed whole and stored only in part, so
// callers that split rows should cut at multiples of llm_row_grain(). t:
// the calling thread's index in the pool (below LLM_MAX_THREADS).
void llm_vec_matmul(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride,
    int lo, int hi, int t);

// One gated delta rule step (kernels.c, llm_delta_step) by the RVV kernel,
// bit for bit the scalar one's S and o. kd >= 1 and vd a multiple of 32,
// as the loader's config checks guarantee (the kernel's chunk is 16 or
// 32 columns). Returns 0, or -1 without doing anything when the scalar
// kernels run.
int llm_vec_delta_step(double *S, const double *k, const double *q, const double *v, double beta,
    double decay, int kd, int vd, double *o);

// Row ranges split across threads start at multiples of this: the vector
// kernels' block (16 or 32 rows), so that no block is cut and computed by
// both sides; 16 with scalar kernels, which take any range.
int llm_row_grain(void);

// The int8 weight at row r, column k, whichever layout its row has
// (packed for the vector kernels or offset for the scalar ones).
int llm_qmat_weight(const struct llm_qmat *w, int r, int k);

#endif
