#include "call_deadline.h"

#include <time.h>

static _Thread_local double deadline;

double call_deadline_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double call_deadline_enter(double seconds)
{
	double prev = deadline;
	double d = call_deadline_now() + seconds;
	if (prev <= 0 || d < prev)
		deadline = d;
	return prev;
}

void call_deadline_restore(double previous)
{
	deadline = previous;
}

double call_deadline_suspend(void)
{
	double prev = deadline;
	deadline = 0;
	return prev;
}

double call_deadline_get(void)
{
	return deadline;
}

double call_deadline_clamp(double timeout_s)
{
	if (deadline <= 0)
		return timeout_s;
	double left = deadline - call_deadline_now();
	if (left < 0.005)
		left = 0.005;
	return timeout_s <= 0 || timeout_s > left ? left : timeout_s;
}

long call_deadline_clamp_ms(long timeout_ms)
{
	if (deadline <= 0)
		return timeout_ms;
	double s = call_deadline_clamp(timeout_ms > 0 ? (double)timeout_ms / 1000.0 : 0);
	long ms = (long)(s * 1000.0 + 0.5);
	return ms > 0 ? ms : 1;
}
