/* passes/machine.c: the figures tile and parallelize size work by, read
 * from Linux's sysfs and the CPU flags at build time. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

void machine_default(Machine *mc)
{
    mc->l1d = 32 * 1024;
    mc->l2 = 1024 * 1024;
    mc->l3 = 8 * 1024 * 1024;
    mc->vector_bytes = 32;
    mc->cores = 1;
    mc->amx = 0;
}

/* "48K", "2048K", "32M" as bytes; 0 when unreadable. */
static int64_t read_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[32] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    char *end;
    int64_t v = strtoll(buf, &end, 10);
    if (*end == 'K')
        v *= 1024;
    else if (*end == 'M')
        v *= 1024 * 1024;
    return v > 0 ? v : 0;
}

static int read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return ok;
}

static void caches(Machine *mc)
{
    for (int i = 0; i < 8; i++) {
        char path[128], type[32] = "", level[8] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_text(path, type, sizeof type))
            break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        read_text(path, level, sizeof level);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        int64_t size = read_size(path);
        if (!size || strcmp(type, "Instruction") == 0)
            continue;
        if (level[0] == '1')
            mc->l1d = size;
        else if (level[0] == '2')
            mc->l2 = size;
        else if (level[0] == '3')
            mc->l3 = size;
    }
}

/* The widest vectors of the CPU kiln runs on, which `cc -march=native`
 * targets too: asked of the CPU, not of the flags kiln was built with. */
static int vector_bytes(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 64;
    if (__builtin_cpu_supports("avx2"))
        return 32;
#endif
    return 16;
}

/* Whether the CPU multiplies bf16 pairs: AMX-TILE and AMX-BF16 (CPUID 7.0
 * EDX bits 24 and 22), or AVX512-BF16 (CPUID 7.1 EAX bit 5). The kernel's
 * leave to use the tiles is asked by the program at run time
 * (runtime/core/rt_amx.c), which falls back to vdpbf16ps
 * (runtime/core/rt_bf16dp.c) where it is refused. */
static int amx_bf16(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 22 & 1))
        return 1;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
#else
    return 0;
#endif
}

void machine_detect(Machine *mc)
{
    machine_default(mc);
    caches(mc);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    mc->cores = n > 0 ? (int)n : 1;
    mc->vector_bytes = vector_bytes();
    mc->amx = amx_bf16();
}

int machine_target(Machine *mc, const char *target)
{
    static const struct { const char *name; int bytes; } levels[] = {
        {"x86-64-v2", 16}, {"x86-64-v3", 32}, {"x86-64-v4", 64}};
    if (!strcmp(target, "native"))
        return 0;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (!strcmp(target, levels[i].name)) {
            mc->vector_bytes = levels[i].bytes;
            mc->amx = 0;
            return 0;
        }
    return -1;
}

/* Sets field `key` (of length len) to v; -1 when there is no such field
 * or v is not one of its values (sizes and counts > 0, amx 0 or 1). */
static int set_field(Machine *mc, const char *key, size_t len, int64_t v)
{
    static const char *const keys[] = {"l1d", "l2", "l3", "vector", "cores", "amx"};
    int i = 0;
    while (i < 6 && !(strlen(keys[i]) == len && strncmp(key, keys[i], len) == 0))
        i++;
    if (i == 5 ? v > 1 : v == 0)
        return -1;
    switch (i) {
    case 0: mc->l1d = v; return 0;
    case 1: mc->l2 = v; return 0;
    case 2: mc->l3 = v; return 0;
    case 3: mc->vector_bytes = (int)v; return 0;
    case 4: mc->cores = (int)v; return 0;
    case 5: mc->amx = (int)v; return 0;
    default: return -1;
    }
}

/* "48K", "2M", "64": bytes or a count; -1 when malformed; *end after it. */
static int64_t parse_size(const char *s, const char **end)
{
    char *e;
    long long v = strtoll(s, &e, 10);
    if (e == s || v < 0 || v > (1LL << 40))
        return -1;
    if (*e == 'K' || *e == 'M')
        v *= *e++ == 'K' ? 1024 : 1024 * 1024;
    *end = e;
    return v;
}

int machine_parse(Machine *mc, const char *spec)
{
    if (strcmp(spec, "default") == 0) {
        machine_default(mc);
        return 0;
    }
    for (const char *p = spec; *p;) {
        size_t klen = strcspn(p, "=,");
        const char *end;
        int64_t v = p[klen] == '=' ? parse_size(p + klen + 1, &end) : -1;
        if (v < 0 || (*end && *end != ',') || set_field(mc, p, klen, v) != 0)
            return -1;
        p = *end ? end + 1 : end;
    }
    return 0;
}
