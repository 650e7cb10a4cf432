/* Hash sets over groups of rows, compiled: the rows of one query are few (a run's thousand,
   a query's judgements), so a set of one group's keys stays in the CPU's cache, where a set
   over every row of a large file would not.

   rag_bench/io/idhash.py calls these and does the same in numpy where the module is not built.
   Both take 64-bit keys (hashes of ids, or codes) and give exact answers about keys; telling
   unequal ids with equal hashes apart is the caller's job, as everywhere in idhash.

   any_repeat(starts, keys) -> bool
       Whether two rows of one group have equal keys; group g is keys[starts[g]:starts[g+1]]
       (the last one runs to the end). starts: int64, ascending; keys: uint64.

   join(groups, group_query, keys, query_offsets, entry_keys, out_rows, out_entries) -> int
       Every pair (row, entry) of equal keys, where row is in a group (groups: int64 starts as
       above, over keys) whose query q = group_query[g] is not negative, and entry is one of
       q's entries, entry_keys[query_offsets[q]:query_offsets[q+1]]. Writes the pairs in row
       order into out_rows and out_entries (int64; entries as positions in entry_keys) and
       returns their number, or -1 when they do not fit. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t *slots; /* a row or entry position per slot; -1 empty */
    uint64_t mask;
    size_t capacity;
} Table;

static uint64_t spread(uint64_t key) { /* codes are small consecutive integers: mix their bits */
    key *= 0x9E3779B97F4A7C15ULL;
    return key ^ (key >> 29);
}

/* Make the table empty with room for n keys at most half full; 0 when out of memory. */
static int reset(Table *t, size_t n) {
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    if (size > t->capacity) {
        free(t->slots);
        t->slots = malloc(size * sizeof *t->slots);
        t->capacity = t->slots ? size : 0;
        if (!t->slots) return 0;
    }
    t->mask = size - 1;
    memset(t->slots, 0xFF, size * sizeof *t->slots);
    return 1;
}

typedef struct {
    const int64_t *starts;
    Py_ssize_t n_groups;
    const uint64_t *keys;
    Py_ssize_t n_keys;
} Groups;

static Py_ssize_t group_end(const Groups *g, Py_ssize_t i) {
    return i + 1 < g->n_groups ? g->starts[i + 1] : g->n_keys;
}

static int valid_groups(const Groups *g) {
    for (Py_ssize_t i = 0; i < g->n_groups; i++)
        if (g->starts[i] < 0 || g->starts[i] > group_end(g, i)) return 0;
    return 1;
}

/* 1: a repeat, 0: none, -1: out of memory */
static int find_repeat(const Groups *g) {
    Table t = {NULL, 0, 0};
    int found = 0;
    for (Py_ssize_t i = 0; i < g->n_groups && !found; i++) {
        Py_ssize_t start = g->starts[i], end = group_end(g, i);
        if (end - start < 2) continue;
        if (!reset(&t, (size_t)(end - start))) {
            found = -1;
            break;
        }
        for (Py_ssize_t row = start; row < end && !found; row++) {
            uint64_t key = g->keys[row];
            uint64_t at = spread(key) & t.mask;
            while (t.slots[at] >= 0) {
                if (g->keys[t.slots[at]] == key) {
                    found = 1;
                    break;
                }
                at = (at + 1) & t.mask;
            }
            t.slots[at] = row;
        }
    }
    free(t.slots);
    return found;
}

static int as_array(PyObject *obj, Py_buffer *view, const char *what, int writable) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    if (view->itemsize != 8) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s must be an array of 64-bit integers", what);
        return 0;
    }
    return 1;
}

static PyObject *any_repeat(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *starts_obj, *keys_obj;
    Py_buffer starts, keys;
    if (!PyArg_ParseTuple(args, "OO", &starts_obj, &keys_obj)) return NULL;
    if (!as_array(starts_obj, &starts, "starts", 0)) return NULL;
    if (!as_array(keys_obj, &keys, "keys", 0)) {
        PyBuffer_Release(&starts);
        return NULL;
    }
    Groups g = {starts.buf, starts.len / 8, keys.buf, keys.len / 8};
    int found = -2;
    if (valid_groups(&g)) {
        Py_BEGIN_ALLOW_THREADS;
        found = find_repeat(&g);
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&starts);
    PyBuffer_Release(&keys);
    if (found == -2) return PyErr_Format(PyExc_ValueError, "group starts outside the keys");
    if (found < 0) return PyErr_NoMemory();
    return PyBool_FromLong(found);
}

typedef struct {
    Groups rows;
    const int64_t *group_query;
    const int64_t *query_offsets;
    Py_ssize_t n_queries;
    const uint64_t *entry_keys;
    Py_ssize_t n_entries;
    int64_t *out_rows, *out_entries;
    Py_ssize_t capacity;
} Join;

static int valid_join(const Join *j) {
    if (!valid_groups(&j->rows)) return 0;
    for (Py_ssize_t q = 0; q < j->n_queries; q++)
        if (j->query_offsets[q] < 0 || j->query_offsets[q] > j->query_offsets[q + 1] ||
            j->query_offsets[q + 1] > j->n_entries)
            return 0;
    for (Py_ssize_t i = 0; i < j->rows.n_groups; i++)
        if (j->group_query[i] >= j->n_queries) return 0;
    return 1;
}

/* the pairs found, -1 when they do not fit, -2 when out of memory */
static Py_ssize_t find_pairs(const Join *j) {
    Table t = {NULL, 0, 0};
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < j->rows.n_groups; i++) {
        int64_t q = j->group_query[i];
        if (q < 0) continue;
        int64_t first = j->query_offsets[q], last = j->query_offsets[q + 1];
        if (first == last) continue;
        if (!reset(&t, (size_t)(last - first))) {
            n = -2;
            break;
        }
        for (int64_t e = first; e < last; e++) {
            uint64_t at = spread(j->entry_keys[e]) & t.mask;
            while (t.slots[at] >= 0) at = (at + 1) & t.mask;
            t.slots[at] = e;
        }
        Py_ssize_t end = group_end(&j->rows, i);
        for (Py_ssize_t row = j->rows.starts[i]; row < end; row++) {
            uint64_t key = j->rows.keys[row];
            for (uint64_t at = spread(key) & t.mask; t.slots[at] >= 0; at = (at + 1) & t.mask) {
                if (j->entry_keys[t.slots[at]] != key) continue;
                if (n == j->capacity) {
                    free(t.slots);
                    return -1;
                }
                j->out_rows[n] = row;
                j->out_entries[n++] = t.slots[at];
            }
        }
    }
    free(t.slots);
    return n;
}

static PyObject *join(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objs[7];
    const char *names[7] = {"groups",     "group_query", "keys",       "query_offsets",
                            "entry_keys", "out_rows",    "out_entries"};
    Py_buffer views[7];
    int got = 0;
    Py_ssize_t n = -3;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6]))
        return NULL;
    for (; got < 7; got++)
        if (!as_array(objs[got], &views[got], names[got], got >= 5)) goto done;
    Join j = {
        {views[0].buf, views[0].len / 8, views[2].buf, views[2].len / 8},
        views[1].buf,
        views[3].buf,
        views[3].len / 8 - 1,
        views[4].buf,
        views[4].len / 8,
        views[5].buf,
        views[6].buf,
        views[5].len / 8 < views[6].len / 8 ? views[5].len / 8 : views[6].len / 8,
    };
    if (views[1].len != views[0].len || j.n_queries < 0 || !valid_join(&j)) {
        PyErr_SetString(PyExc_ValueError, "groups, queries or offsets out of range");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    n = find_pairs(&j);
    Py_END_ALLOW_THREADS;
    if (n == -2) PyErr_NoMemory();
done:
    for (int b = 0; b < got; b++) PyBuffer_Release(&views[b]);
    return n >= -1 ? PyLong_FromSsize_t(n) : NULL;
}

static PyMethodDef methods[] = {
    {"any_repeat", any_repeat, METH_VARARGS, "Whether a group holds a key twice."},
    {"join", join, METH_VARARGS, "The pairs of equal keys of rows and their query's entries."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_groups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__groups(void) { return PyModule_Create(&module); }
