/* One pass over the lines of a record file (a TREC run, TREC qrels), compiled.

   rag_bench/io/tabular.py calls it first and falls back to pyarrow's CSV reader, then to its
   line-by-line reader, whenever this scanner declines a file. It declines anything it is not
   sure to read exactly as those readers would (a comment, an empty field, a control character,
   a number it does not parse exactly, invalid UTF-8, ...), so it only ever changes how fast a
   file is read, never what is read: every value it returns is the one the others return.

   It runs with the GIL released, so Python threads scan the parts of one file at once.

   scan(buffer, start, end, delimiter, kinds, outputs) -> (rows, runs) or None
       buffer[start:end] holds whole lines. kinds has one byte per field of a line: '.' for a
       field that is skipped, 'i' an id (kept as runs of equal values: the row where each run
       starts and its value), 't' a text id (every value, and a 64-bit hash of it), 's' a
       score (a double), 'g' a grade (a 64-bit integer). A line has exactly len(kinds) fields
       (pyarrow's reader, too, takes a file whose lines all have the same). outputs holds
       writable buffers, taken in field order: 'i' four (int64 run starts, int64 offsets,
       uint8 bytes, uint64 hashes of the runs' values), 't' three (int64 offsets, uint8 bytes,
       uint64 hashes), 's' one (float64),
       'g' one (int64). Offsets have one entry more than their values. Empty lines are
       skipped. Returns the rows read and, per field, the runs found ('i'; 0 for the others),
       or None when the scanner declines the range. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 16
#define MAX_OUTPUTS (4 * MAX_FIELDS)
#define MAX_NUMBER 64 /* longest score or grade text the scanner reads itself */

/* --- the hash of rag_bench.io.idhash._string_hashes, byte for byte ----------------------- */

static const uint64_t MULTIPLIER = 0x9E3779B97F4A7C15ULL;

static uint64_t fold(uint64_t h, uint64_t word) {
    h ^= word;
    h *= MULTIPLIER;
    return h ^ (h >> 32);
}

/* The first n < 8 bytes of a little-endian word: what a word of a string's last bytes keeps. */
static uint64_t low_bytes(uint64_t word, size_t n) {
    return n >= 8 ? word : word & ((1ULL << (8 * n)) - 1);
}

/* 8 bytes at p as one word, or the bytes up to limit followed by zeros (never read past it) */
static inline uint64_t load_word(const char *p, const char *limit) {
    uint64_t word = 0;
    if (limit - p >= 8) { /* one load; a copy of a variable length would be a slow loop */
        memcpy(&word, p, 8);
        return word;
    }
    memcpy(&word, p, (size_t)(limit - p));
    return word;
}

/* the hash of s[0:n]; the buffer holding it may be read up to limit */
static uint64_t string_hash(const char *s, size_t n, const char *limit) {
    uint64_t h = (uint64_t)n << 56;
    size_t at = 0;
    do { /* the first word is folded even for an empty string */
        h = fold(h, low_bytes(load_word(s + at, limit), n - at));
        at += 8;
    } while (at < n);
    return h;
}

/* --- strict UTF-8, as Arrow validates its strings ----------------------------------------- */

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

/* The special bytes among 64: below 0x21 (a delimiter, a line end, a control character) or
   above 0x7E (DEL, or a byte of a UTF-8 sequence), one bit each, the first byte lowest. With
   SSE2 (every x86-64 CPU has it) 16 bytes at a time: signed, the bytes from 0x80 up are
   negative, so below 0x21 as well. Elsewhere a byte at a time. */
static inline uint64_t special_bytes(const unsigned char *p) {
#if defined(__SSE2__)
    const __m128i low = _mm_set1_epi8(0x21), del = _mm_set1_epi8(0x7F);
    uint64_t mask = 0;
    for (int at = 0; at < 64; at += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(p + at));
        __m128i flags = _mm_or_si128(_mm_cmplt_epi8(bytes, low), _mm_cmpeq_epi8(bytes, del));
        mask |= (uint64_t)(uint16_t)_mm_movemask_epi8(flags) << at;
    }
    return mask;
#else
    uint64_t mask = 0;
    for (int at = 0; at < 64; at++)
        if (p[at] < 0x21 || p[at] > 0x7E) mask |= 1ULL << at;
    return mask;
#endif
}

/* The special bytes of buffer[p:end), in order, a block of 64 at a time: the flags of a whole
   block come at once, and stepping from one to the next is a bit operation, not a search that
   must wait for the one before it. */
typedef struct {
    const char *block, *end;
    uint64_t mask; /* the block's special bytes not yet handed out */
} Specials;

static void specials_at(Specials *it, const char *block, const char *end) {
    it->block = block;
    it->end = end;
    if (end - block >= 64) {
        it->mask = special_bytes((const unsigned char *)block);
    } else if (block < end) { /* the last block, padded with a byte that is not special */
        unsigned char padded[64];
        memset(padded, 'a', sizeof padded);
        memcpy(padded, block, (size_t)(end - block));
        it->mask = special_bytes(padded);
    } else {
        it->mask = 0;
    }
}

/* The next special byte, or end when there is none. */
static inline const char *next_special(Specials *it) {
    while (it->mask == 0) {
        if (it->end - it->block <= 64) return it->end;
        specials_at(it, it->block + 64, it->end);
    }
    const char *at = it->block + __builtin_ctzll(it->mask);
    it->mask &= it->mask - 1;
    return at;
}

/* --- numbers -------------------------------------------------------------------------------- */

static const double POWERS_OF_TEN[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A decimal number [+-]?(digits[.digits]|.digits)([eE][+-]?digits)?, correctly rounded (as
   Arrow and Python's float() round), finite; 0 when the text is anything else. A mantissa below
   2^53 with a power of ten up to 22 is one exact multiplication or division of two exact
   doubles; any other number goes to strtod, which must then consume the whole text. */
static int parse_score(const char *s, size_t n, double *out) {
    size_t i = 0;
    int negative = 0;
    uint64_t mantissa = 0;
    int digits = 0, significant = 0, exponent = 0;
    if (n == 0 || n >= MAX_NUMBER) return 0;
    if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (significant || s[i] != '0') {
            if (++significant <= 19) mantissa = mantissa * 10 + (uint64_t)(s[i] - '0');
            else exponent++;
        }
    }
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (significant || s[i] != '0') {
                if (++significant <= 19) {
                    mantissa = mantissa * 10 + (uint64_t)(s[i] - '0');
                    exponent--;
                }
            } else {
                exponent--;
            }
        }
    }
    if (digits == 0) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int sign = 1, value = 0, any = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, any = 1)
            if (value < 100000) value = value * 10 + (s[i] - '0');
        if (!any) return 0;
        exponent += sign * value;
    }
    if (i != n) return 0;
    double value;
    if (significant <= 19 && mantissa < (1ULL << 53) && exponent >= -22 && exponent <= 22) {
        value = (double)mantissa;
        value = exponent < 0 ? value / POWERS_OF_TEN[-exponent] : value * POWERS_OF_TEN[exponent];
    } else {
        char text[MAX_NUMBER];
        char *end;
        memcpy(text, s, n);
        text[n] = '\0';
        value = strtod(text, &end);
        if (end != text + n) return 0; /* e.g. a locale whose decimal point is not '.' */
        *out = value;
        return isfinite(value);
    }
    *out = negative ? -value : value;
    return 1;
}

/* [+-]?digits, at most 18 of them (the range is checked by the caller). */
static int parse_grade(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int negative = 0;
    int64_t value = 0;
    if (n == 0) return 0;
    if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
    if (i == n || n - i > 18) return 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        value = value * 10 + (s[i] - '0');
    }
    *out = negative ? -value : value;
    return 1;
}

/* --- the scan --------------------------------------------------------------------------------- */

typedef struct {
    char kind;
    Py_buffer *out[4];
    Py_ssize_t runs;           /* 'i': runs found */
    const char *last;          /* 'i': the value of the current run */
    size_t last_n;
    int64_t data_used;         /* 'i', 't': bytes written */
} Field;

static int64_t *int64s(Py_buffer *b) { return (int64_t *)b->buf; }

/* Copy s[0:n] to out[at:at + n]: a word at a time where the source (readable up to limit) and
   out have the room (the bytes past n are overwritten later); 0 when out is too small. */
static int copy_out(Py_buffer *out, int64_t at, const char *s, size_t n, const char *limit) {
    char *to = (char *)out->buf + at;
    if (at + (int64_t)n > (int64_t)out->len) return 0;
    if (at + (int64_t)n + 8 <= (int64_t)out->len && limit - s >= (ptrdiff_t)n + 8) {
        for (size_t k = 0; k < n; k += 8) memcpy(to + k, s + k, 8);
    } else {
        memcpy(to, s, n);
    }
    return 1;
}

/* Whether a[0:n] and b[0:n] are equal; both may be read up to limit. */
static int same_bytes(const char *a, const char *b, size_t n, const char *limit) {
    size_t at = 0;
    for (; at + 8 <= n; at += 8)
        if (load_word(a + at, limit) != load_word(b + at, limit)) return 0;
    return at == n || low_bytes(load_word(a + at, limit) ^ load_word(b + at, limit), n - at) == 0;
}

/* Keep one field's value of row ``row`` (non-empty, no byte below 0x21, no DEL; the buffer
   holding it may be read up to limit); 0 declines the range. */
static int keep(Field *f, Py_ssize_t row, const char *s, size_t n, int ascii, const char *limit) {
    switch (f->kind) {
    case 'i':
        if (f->runs > 0 && n == f->last_n && same_bytes(s, f->last, n, limit)) return 1;
        if (!ascii && !valid_utf8((const unsigned char *)s, n)) return 0;
        if (!copy_out(f->out[2], f->data_used, s, n, limit)) return 0;
        int64s(f->out[0])[f->runs] = row;
        f->data_used += (int64_t)n;
        f->runs++;
        int64s(f->out[1])[f->runs] = f->data_used;
        ((uint64_t *)f->out[3]->buf)[f->runs - 1] = string_hash(s, n, limit);
        f->last = s;
        f->last_n = n;
        return 1;
    case 't':
        if (!ascii && !valid_utf8((const unsigned char *)s, n)) return 0;
        if (!copy_out(f->out[1], f->data_used, s, n, limit)) return 0;
        f->data_used += (int64_t)n;
        int64s(f->out[0])[row + 1] = f->data_used;
        ((uint64_t *)f->out[2]->buf)[row] = string_hash(s, n, limit);
        return 1;
    case 's':
        return parse_score(s, n, (double *)f->out[0]->buf + row);
    case 'g':
        return parse_grade(s, n, int64s(f->out[0]) + row);
    }
    return 1;
}

/* Scan buffer[0:n]; the rows read, or -1 to decline. A line ends at '\n' or "\r\n" (a lone
   '\r' is declined) and has exactly n_fields fields, separated by one delimiter each. */
static Py_ssize_t scan_lines(const char *buffer, Py_ssize_t n, char delimiter, Field *fields,
                             int n_fields, Py_ssize_t capacity) {
    Py_ssize_t row = 0;
    const char *end = buffer + n, *start = buffer; /* the field being read starts at start */
    int k = 0, ascii = 1;
    Specials it;
    specials_at(&it, buffer, end);
    for (;;) {
        const char *at = next_special(&it);
        unsigned char c = at < end ? (unsigned char)*at : '\n';
        if (c >= 0x80) { /* a byte of a UTF-8 sequence, within the field */
            ascii = 0;
            continue;
        }
        int crlf = c == '\r' && end - at > 1 && at[1] == '\n';
        if (at == start && k == 0 && (c == '\n' || crlf)) { /* an empty line */
            if (at == end) return row;
            if (crlf) next_special(&it); /* the '\n' */
            start = at + 1 + crlf;
            continue;
        }
        if (c == 0x7F || at == start) return -1; /* a DEL, or an empty field */
        if (k == 0 && (row >= capacity || *start == '#')) return -1; /* a comment: not ours */
        size_t length = (size_t)(at - start);
        if (fields[k].kind != '.') {
            if (!keep(&fields[k], row, start, length, ascii, end)) return -1;
        } else if (!ascii && !valid_utf8((const unsigned char *)start, length)) {
            return -1; /* the other readers decline a file that is not UTF-8 */
        }
        ascii = 1;
        if (c == (unsigned char)delimiter && k + 1 < n_fields) {
            k++;
            start = at + 1;
            continue;
        }
        if (k + 1 < n_fields || (c != '\n' && !crlf))
            return -1; /* too few or too many fields, another whitespace, a control byte */
        row++;
        if (at == end) return row;
        if (crlf) next_special(&it); /* the '\n' */
        k = 0;
        start = at + 1 + crlf;
    }
}

static int outputs_needed(char kind) {
    return kind == 'i' ? 4 : kind == 't' ? 3 : kind == '.' ? 0 : 1;
}

static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buffer, kinds, outs[MAX_OUTPUTS];
    Py_ssize_t start, end, rows = -1, capacity = PY_SSIZE_T_MAX;
    int delimiter, n_outs = 0;
    PyObject *outputs, *result = NULL;
    Field fields[MAX_FIELDS];
    if (!PyArg_ParseTuple(args, "y*nnCy*O", &buffer, &start, &end, &delimiter, &kinds,
                          &outputs))
        return NULL;
    int n_fields = (int)kinds.len;
    if (start < 0 || end > buffer.len || start > end || n_fields < 1 || n_fields > MAX_FIELDS ||
        !PyList_Check(outputs)) {
        PyErr_SetString(PyExc_ValueError, "bad range, kinds or outputs");
        goto done;
    }
    memset(fields, 0, sizeof fields);
    for (int k = 0; k < n_fields; k++) {
        char kind = ((const char *)kinds.buf)[k];
        if (strchr(".itsg", kind) == NULL || kind == '\0') {
            PyErr_Format(PyExc_ValueError, "unknown field kind %c", kind);
            goto done;
        }
        fields[k].kind = kind;
        for (int b = 0; b < outputs_needed(kind); b++) {
            if (n_outs >= PyList_GET_SIZE(outputs)) {
                PyErr_SetString(PyExc_ValueError, "too few output buffers");
                goto done;
            }
            if (PyObject_GetBuffer(PyList_GET_ITEM(outputs, n_outs), &outs[n_outs],
                                   PyBUF_WRITABLE) < 0)
                goto done;
            fields[k].out[b] = &outs[n_outs++];
        }
        /* offsets: one entry per value and one more; the others one entry per value */
        Py_buffer *offsets = kind == 'i' ? fields[k].out[1] : kind == 't' ? fields[k].out[0] : NULL;
        if (offsets != NULL && offsets->len < 8) {
            PyErr_SetString(PyExc_ValueError, "offsets need at least one entry");
            goto done;
        }
        for (int b = 0; b < outputs_needed(kind); b++) {
            Py_buffer *out = fields[k].out[b];
            Py_ssize_t values = out == offsets ? out->len / 8 - 1 : out->len / 8;
            if ((kind == 't' && b != 1) || kind == 's' || kind == 'g' || (kind == 'i' && b != 2))
                capacity = values < capacity ? values : capacity;
        }
        if (offsets != NULL) int64s(offsets)[0] = 0;
    }
    if (n_outs != PyList_GET_SIZE(outputs)) {
        PyErr_SetString(PyExc_ValueError, "too many output buffers");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    rows = scan_lines((const char *)buffer.buf + start, end - start, (char)delimiter, fields,
                      n_fields, capacity);
    Py_END_ALLOW_THREADS;
    if (rows < 0) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *runs = PyTuple_New(n_fields);
        if (runs != NULL) {
            for (int k = 0; k < n_fields; k++)
                PyTuple_SET_ITEM(runs, k, PyLong_FromSsize_t(fields[k].runs));
            result = Py_BuildValue("(nN)", rows, runs);
        }
    }
done:
    for (int b = 0; b < n_outs; b++) PyBuffer_Release(&outs[b]);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Scan whole lines of buffer[start:end] into outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
