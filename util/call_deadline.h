/* The deadline of the backend call the current thread is in. The dispatch
 * layer (backends/dispatch.c) sets it; whatever waits underneath it (exec
 * of a guest command, an HTTP or gRPC request) bounds its wait with
 * call_deadline_clamp(), so no call outlives its deadline. */
#ifndef SBFS_CALL_DEADLINE_H
#define SBFS_CALL_DEADLINE_H

/* Monotonic seconds. */
double call_deadline_now(void);

/* Sets the thread's deadline to now + seconds, or keeps an earlier one
 * already set (a nested call never outlives its outer call). Returns the
 * previous deadline, for call_deadline_restore. */
double call_deadline_enter(double seconds);
void call_deadline_restore(double previous);
/* Lifts the deadline for clean-up that must run even after it passed
 * (killing a timed-out command, checking the sandbox is alive), which
 * keeps its own bound. Returns the deadline for call_deadline_restore. */
double call_deadline_suspend(void);
/* The absolute deadline (call_deadline_now() scale), 0 when none. */
double call_deadline_get(void);

/* timeout_s (0 = none) shortened to what is left of the thread's deadline;
 * unchanged outside a call. Never 0 under a deadline: a spent one gives a
 * few milliseconds, so the wait ends at once instead of never. */
double call_deadline_clamp(double timeout_s);
/* The same in whole milliseconds, for libcurl (0 = none). */
long call_deadline_clamp_ms(long timeout_ms);

#endif
