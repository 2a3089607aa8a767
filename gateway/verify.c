/* Password verification off the event loop: an Argon2id verification takes
 * tens of milliseconds, which every other session would wait for on the
 * loop. A few worker threads take jobs from a bounded queue and hand each
 * verdict back through an ev_async; the loop then calls
 * gw_session_verdict(). Jobs live in an array allocated once
 * ([gateway] max_pending_logins of them): a login beyond is refused by the
 * caller. The loop owns which job is free and whose it is; the threads
 * touch a job's hash, password and verdict only between taking it from
 * `todo` and putting it on `done`. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "daemon_wait.h"
#include "gw_private.h"

/* Pops the oldest id of a ring of cap ids (head, n); under mu. */
static uint32_t ring_pop(uint32_t *ring, uint32_t *head, uint32_t *n, uint32_t cap)
{
	uint32_t id = ring[*head];

	*head = (*head + 1) % cap;
	(*n)--;
	return id;
}

static void ring_push(uint32_t *ring, uint32_t head, uint32_t *n, uint32_t cap, uint32_t id)
{
	ring[(head + *n) % cap] = id;
	(*n)++;
}

static void *worker_main(void *arg)
{
	struct gw_verify *v = arg;

	daemon_thread_off_path("login-verify"); /* a login flood must not hold a CPU */
	pthread_mutex_lock(&v->mu);
	for (;;) {
		while (!v->todo_n && !v->stop)
			pthread_cond_wait(&v->cv, &v->mu);
		if (v->stop)
			break;
		uint32_t id = ring_pop(v->todo, &v->todo_head, &v->todo_n, v->cap);
		struct gw_vjob *j = &v->jobs[id];

		pthread_mutex_unlock(&v->mu);
		uint64_t t0 = mono_ns();

		j->ok = creds_password_verify(j->hash, j->pw);
		j->ns = mono_ns() - t0;
		sodium_memzero(j->pw, sizeof(j->pw));
		pthread_mutex_lock(&v->mu);
		ring_push(v->done, v->done_head, &v->done_n, v->cap, id);
		ev_async_send(v->loop, &v->async);
	}
	pthread_mutex_unlock(&v->mu);
	return NULL;
}

/* The loop: every verdict the threads have finished. */
static void on_done(struct ev_loop *loop, ev_async *w, int revents)
{
	struct gw_verify *v = container_of(w, struct gw_verify, async);
	struct gw *g = container_of(v, struct gw, verify);

	(void)loop;
	(void)revents;
	for (;;) {
		uint32_t id;

		pthread_mutex_lock(&v->mu);
		if (!v->done_n) {
			pthread_mutex_unlock(&v->mu);
			return;
		}
		id = ring_pop(v->done, &v->done_head, &v->done_n, v->cap);
		pthread_mutex_unlock(&v->mu);
		struct gw_vjob *j = &v->jobs[id];
		void *owner = j->owner;

		g->st.login_verifications++;
		g->st.login_verify_ns += j->ns;
		j->owner = NULL;
		v->free_ids[v->n_free++] = id;
		v->pending--;
		if (owner) /* else its session closed meanwhile */
			gw_session_verdict(g, owner, j->ok);
	}
}

int gw_verify_open(struct gw *g)
{
	struct gw_verify *v = &g->verify;
	uint32_t cap = (uint32_t)g->cfg.max_pending_logins;
	unsigned want = (unsigned)g->cfg.login_verify_threads;

	if (sodium_init() < 0 || creds_dummy_hash(v->dummy) < 0) {
		log_err("libsodium cannot start");
		return -ENOMEM;
	}
	v->loop = g->loop;
	v->cap = cap;
	v->jobs = calloc(cap, sizeof(*v->jobs));
	v->free_ids = calloc(cap, sizeof(uint32_t));
	v->todo = calloc(cap, sizeof(uint32_t));
	v->done = calloc(cap, sizeof(uint32_t));
	if (!v->jobs || !v->free_ids || !v->todo || !v->done ||
	    pthread_mutex_init(&v->mu, NULL) != 0)
		return -ENOMEM;
	if (pthread_cond_init(&v->cv, NULL) != 0) {
		pthread_mutex_destroy(&v->mu);
		return -ENOMEM;
	}
	v->made = 1;
	for (uint32_t i = 0; i < cap; i++)
		v->free_ids[v->n_free++] = cap - 1 - i;
	ev_async_init(&v->async, on_done);
	ev_async_start(g->loop, &v->async);
	for (; v->n_threads < want && v->n_threads < GW_VERIFY_MAX_THREADS; v->n_threads++)
		if (pthread_create(&v->threads[v->n_threads], NULL, worker_main, v) != 0) {
			log_err("login verification threads: %u of %u started", v->n_threads, want);
			return v->n_threads ? 0 : -EAGAIN;
		}
	return 0;
}

void gw_verify_close(struct gw *g)
{
	struct gw_verify *v = &g->verify;

	if (v->made) {
		pthread_mutex_lock(&v->mu);
		v->stop = 1;
		pthread_cond_broadcast(&v->cv);
		pthread_mutex_unlock(&v->mu);
		for (unsigned i = 0; i < v->n_threads; i++)
			pthread_join(v->threads[i], NULL);
		v->n_threads = 0;
		ev_async_stop(g->loop, &v->async);
		pthread_cond_destroy(&v->cv);
		pthread_mutex_destroy(&v->mu);
		v->made = 0;
	}
	if (v->jobs)
		sodium_memzero(v->jobs, v->cap * sizeof(*v->jobs));
	free(v->jobs);
	free(v->free_ids);
	free(v->todo);
	free(v->done);
	memset(v, 0, sizeof(*v));
}

int gw_verify_submit(struct gw *g, const char *hash, const char *pw, void *owner)
{
	struct gw_verify *v = &g->verify;
	uint32_t id;

	if (!v->n_free)
		return -EBUSY;
	id = v->free_ids[--v->n_free];
	v->pending++;
	v->jobs[id].owner = owner;
	snprintf(v->jobs[id].hash, sizeof(v->jobs[id].hash), "%s", hash ? hash : v->dummy);
	snprintf(v->jobs[id].pw, sizeof(v->jobs[id].pw), "%s", pw);
	pthread_mutex_lock(&v->mu);
	ring_push(v->todo, v->todo_head, &v->todo_n, v->cap, id);
	pthread_cond_signal(&v->cv);
	pthread_mutex_unlock(&v->mu);
	return (int)id;
}

void gw_verify_cancel(struct gw *g, int id)
{
	if (id >= 0 && (uint32_t)id < g->verify.cap)
		g->verify.jobs[id].owner = NULL;
}
