/* pycell: the fields of a policy, one table (policy_fields.c).
 *
 * Every member of struct policy has a row: its JSON key, its type, where
 * it lives in the struct, its bounds and a line of documentation.  The
 * rows drive parsing (with the messages of pycell-policy(5)), writing back
 * to JSON, comparison (whether a zygote may serve a policy) and the key
 * of the seccomp cache (the rows marked PF_FILTER), so a new field cannot
 * be forgotten in one of them; test_policy.c proves the rows cover the
 * struct byte for byte. */
#ifndef PYCELL_POLICY_FIELDS_H
#define PYCELL_POLICY_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config/json_check.h"
#include "config/policy.h"

enum policy_field_type {
	PF_META = 0,     /* name, path: who the policy is, not what it allows */
	PF_STRING,       /* char *; NULL allowed (description) */
	PF_PATH,         /* char *, an absolute path */
	PF_DURATION,     /* uint64_t milliseconds: "30s" */
	PF_SIZE,         /* uint64_t bytes: "512M" */
	PF_U32,          /* uint32_t (and uid_t, gid_t) */
	PF_CPU,          /* uint32_t thousandths of a core, from a number of cores */
	PF_BOOL,
	PF_ENUM,         /* an enum (int) whose values index `choices` */
	PF_NAME,         /* char *, one of `choices` */
	PF_STRV,         /* char ** and a size_t count */
	PF_ENV,          /* char ** "KEY=VALUE" and a count; JSON: an object */
	PF_BINDS,        /* struct bind_spec * and a count */
	PF_RULES,        /* struct seccomp_rule * and a count */
	PF_NETWORK,      /* struct net_policy: "none", "loopback" or {"egress": [...]} */
};

/* Flags of a row. */
#define PF_FILTER 1u          /* read by the seccomp filter: in its cache key */
#define PF_NOT_INHERITED 2u   /* reset before a file's keys apply ("extends") */

struct policy_field {
	const char *section;   /* "limits", ...; NULL for a top-level key */
	const char *key;       /* "memory" */
	enum policy_field_type type;
	size_t off, size, align;             /* the member */
	size_t cnt_off, cnt_size, cnt_align; /* its count (arrays); cnt_size 0: none */
	uint64_t min, max;     /* bounds of numbers */
	bool zero_ok;          /* 0 means "no limit" */
	unsigned flags;
	const char *const *choices;  /* PF_ENUM, PF_NAME (NULL-terminated) */
	/* Parses the value itself where the type's rule is not enough. */
	int (*parse)(const struct jc *c, const char *key, const json_t *v, struct policy *p);
	/* PF_STRV: checks each element. */
	int (*check)(const struct jc *c, const char *key, const json_t *v, const char *s);
	const char *doc;       /* one line, as pycell-policy(5) says it */
};

extern const struct policy_field policy_fields[];
extern const size_t policy_n_fields;

/* The keys a policy file may have at the top level, "extends" first. */
const char *const *policy_top_keys(void);
/* Apply the keys of root (its top-level keys checked) on top of *p. */
int policy_fields_apply(const struct jc *c, const json_t *root, struct policy *p);
/* The rows with any of `flags` (0: all but PF_META) as a JSON document
 * that policy_fields_apply reads back into the same values. */
json_t *policy_fields_json(const struct policy *p, unsigned flags);
bool policy_fields_equal(const struct policy *a, const struct policy *b);
void policy_fields_free(struct policy *p);

/* ---- policy_values.c (pv_): the rows' own parsers, and the helpers of the types */
extern const char *const policy_backend_names[];
int pv_parse_cpu(const struct jc *c, const char *key, const json_t *v, struct policy *p);
#define SHARED_MEMORY_MIN (64ull << 20)
int pv_parse_shared_memory(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_env(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_backend(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_hostname(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_binds(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_index(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_check_allow(const struct jc *c, const char *key, const json_t *v, const char *s);
int pv_parse_network(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_rules(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_parse_python_flags(const struct jc *c, const char *key, const json_t *v, struct policy *p);
int pv_check_group(const struct jc *c, const char *key, const json_t *v, const char *s);
int pv_check_module(const struct jc *c, const char *key, const json_t *v, const char *s);
int pv_check_tool_pattern(const struct jc *c, const char *key, const json_t *v, const char *s);
/* An array of unique strings, each accepted by `check` (which may be NULL). */
int pv_string_list(const struct jc *c, const char *key, const json_t *v,
		int (*check)(const struct jc *, const char *, const json_t *, const char *),
		char ***out, size_t *n_out);
/* One of choices (NULL-terminated): its index in *out. */
int pv_apply_choice(const struct jc *c, const char *key, const json_t *v, const char *const choices[], int *out);
json_t *pv_strv_json(char *const *v, size_t n);
json_t *pv_action_json(const struct seccomp_rule *r);
void pv_binds_free(struct bind_spec *b, size_t n);
void pv_rules_free(struct seccomp_rule *r, size_t n);

#endif
