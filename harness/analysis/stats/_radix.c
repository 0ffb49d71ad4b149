/* An LSD radix sort of unsigned 32-bit integers, for `loo.sort_ints` (the summary sorts
 * each run's latencies). numpy's np.sort dispatches x86-simd-sort's AVX-512 path, whose
 * compress-store is microcoded on AMD Zen 4: 28 ns per int32 there, where this costs a
 * few. Three passes of 11-bit digits, counted in one read; a pass whose digit is the
 * same for every value is skipped. Values only, no indices; the GIL is let go. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define BITS 11
#define BUCKETS (1u << BITS)
#define PASSES 3

/* Sorts a into ascending order using b (as long as a) as scratch; returns which buffer
 * holds the result (0: a, 1: b). */
static int radix_u32(uint32_t *a, uint32_t *b, size_t n) {
    static const unsigned shift[PASSES] = {0, BITS, 2 * BITS};
    size_t (*count)[BUCKETS] = calloc(PASSES, sizeof *count);
    if (!count) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = a[i];
        count[0][v & (BUCKETS - 1)]++;
        count[1][(v >> BITS) & (BUCKETS - 1)]++;
        count[2][v >> (2 * BITS)]++;
    }
    uint32_t *src = a, *dst = b;
    int where = 0;
    for (int p = 0; p < PASSES; p++) {
        size_t *c = count[p];
        if (n == 0 || c[(src[0] >> shift[p]) & (BUCKETS - 1)] == n) continue;
        size_t sum = 0;
        for (unsigned d = 0; d < BUCKETS; d++) {
            size_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t v = src[i];
            dst[c[(v >> shift[p]) & (BUCKETS - 1)]++] = v;
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
        where ^= 1;
    }
    free(count);
    return where;
}

static PyObject *sort_u32(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*w*", &a, &b)) return NULL;
    PyObject *out = NULL;
    if (a.len != b.len || a.len % 4 != 0 || a.itemsize != 4 || b.itemsize != 4
            || !PyBuffer_IsContiguous(&a, 'C') || !PyBuffer_IsContiguous(&b, 'C')) {
        PyErr_SetString(PyExc_ValueError,
                        "sort_u32 takes two contiguous uint32 buffers of one length");
    } else {
        int where;
        Py_BEGIN_ALLOW_THREADS
        where = radix_u32((uint32_t *)a.buf, (uint32_t *)b.buf, (size_t)(a.len / 4));
        Py_END_ALLOW_THREADS
        out = where < 0 ? PyErr_NoMemory() : PyLong_FromLong(where);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"sort_u32", sort_u32, METH_VARARGS,
     "sort_u32(a, b) -> 0 or 1: sorts the uint32 buffer a, b (as long) as scratch; "
     "the result is in a (0) or b (1)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_radix", "A radix sort of uint32 for the summary's sorts.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__radix(void) { return PyModule_Create(&module); }
