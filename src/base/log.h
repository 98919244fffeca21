/* pycell: logging to stderr (never stdout: in `pycell mcp` that is MCP). */
#ifndef PYCELL_LOG_H
#define PYCELL_LOG_H

#include <stdint.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_level;
/* Where messages go instead of stderr, when set (the journal: cli/systemd.h):
 * the message without the "pycell: LEVEL: " prefix or a newline. */
extern void (*log_sink)(enum log_level lvl, const char *msg);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_level >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)
/* microseconds since the first call, for per-step timings in debug logs */
uint64_t log_elapsed_us(void);

#endif
