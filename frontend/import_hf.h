/* frontend/import_hf.h: what import_hf.c's config reader shares with
 * import_hf_quant.c, for those two files only. */
#ifndef KILN_IMPORT_HF_H
#define KILN_IMPORT_HF_H

#include "fe.h"

/* config.json being read: every key taken is accounted for. */
typedef struct {
    FeCx fx;                    /* a and d, for fe_got and fe_quote */
    json_t *root;
    const char *type;           /* model_type */
    const char **taken;         /* keys read so far */
    int ntaken, cap;
    int mxfp4;                  /* quantization_config's quant_method "mxfp4" */
} Cfg;

/* The value of key (NULL when absent or null), which is now accounted for. */
json_t *hf_take(Cfg *c, const char *key);
/* One line: key's value j is not what want says. */
void hf_bad(Cfg *c, const char *key, json_t *j, const char *want);

/* quantization_config: absent, an FP8 checkpoint's or gpt_oss's MXFP4
 * (import_hf_quant.c); sets c->mxfp4. */
void hf_quantization(Cfg *c);

#endif
