/* SPDX-License-Identifier: MIT */
/*
 * The io pool's workers and their hand-back to the loop. Jobs wait in a
 * FIFO queue under one mutex; a worker takes one, runs it unlocked, puts
 * it on the done list and bumps an eventfd; the loop's io watcher on that
 * eventfd takes the whole done list and runs the completions. The mutex
 * orders a worker's writes to a job's arg before the loop's reads.
 */
#include "lib/base/iopool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "proto/base/util.h"

struct iojob {
	struct list node;	/* in the queue, then in the done list */
	iojob_run_fn run;
	iojob_done_fn done;
	void *arg;
	atomic_bool cancel;
};

struct iopool {
	struct tc_loop *loop;
	int efd;
	struct tc_io *io;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct list queue;
	struct list running;
	struct list done;
	bool stopping;
	pthread_t *threads;
	unsigned nthreads;
	unsigned pending;	/* loop thread only */
};

/* Takes queued jobs until the pool stops; runs each unless cancelled. */
static void *worker(void *arg)
{
	struct iopool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stopping && list_empty(&p->queue))
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stopping)
			break;
		struct iojob *job = list_first(&p->queue, struct iojob, node);
		list_remove(&job->node);
		list_insert_tail(&p->running, &job->node);
		pthread_mutex_unlock(&p->mu);

		if (!atomic_load(&job->cancel))
			job->run(job, job->arg);

		pthread_mutex_lock(&p->mu);
		list_remove(&job->node);
		list_insert_tail(&p->done, &job->node);
		uint64_t one = 1;
		/* Only EAGAIN (counter full, so already readable) can fail. */
		(void)!write(p->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Runs the completions of every job the workers finished. */
static void drain_done(struct iopool *p)
{
	struct list batch;
	list_init(&batch);
	pthread_mutex_lock(&p->mu);
	if (!list_empty(&p->done)) {
		/* Splice: the batch takes the done list whole. */
		batch.next = p->done.next;
		batch.prev = p->done.prev;
		batch.next->prev = &batch;
		batch.prev->next = &batch;
		list_init(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	while (!list_empty(&batch)) {
		struct iojob *job = list_first(&batch, struct iojob, node);
		list_remove(&job->node);
		p->pending--;
		job->done(job->arg, atomic_load(&job->cancel));
		free(job);
	}
}

/* The eventfd is readable: workers finished jobs. */
static void on_wake(void *arg, int revents)
{
	struct iopool *p = arg;
	uint64_t n;
	(void)!read(p->efd, &n, sizeof(n));
	drain_done(p);
}

int iopool_new(struct tc_loop *loop, unsigned threads, struct iopool **ret)
{
	if (threads == 0)
		threads = IOPOOL_DEFAULT_THREADS;
	if (threads > IOPOOL_MAX_THREADS)
		return -EINVAL;
	struct iopool *p = xcalloc(1, sizeof(*p));
	p->loop = loop;
	list_init(&p->queue);
	list_init(&p->running);
	list_init(&p->done);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->efd < 0) {
		int r = -errno;
		iopool_free(p);
		return r;
	}
	p->io = tc_io_new(loop, p->efd, TC_IO_READ, on_wake, p);
	tc_io_start(p->io);
	p->threads = xcalloc(threads, sizeof(*p->threads));
	for (; p->nthreads < threads; p->nthreads++) {
		int r = pthread_create(&p->threads[p->nthreads], NULL, worker, p);
		if (r != 0) {
			iopool_free(p);
			return -r;
		}
	}
	*ret = p;
	return 0;
}

struct iopool *iopool_free(struct iopool *p)
{
	if (!p)
		return NULL;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	/* Jobs not started never will be: to the done list, cancelled. */
	while (!list_empty(&p->queue)) {
		struct iojob *job = list_first(&p->queue, struct iojob, node);
		list_remove(&job->node);
		atomic_store(&job->cancel, true);
		list_insert_tail(&p->done, &job->node);
	}
	/* Running ones are asked to stop early. */
	for (struct list *n = p->running.next; n != &p->running; n = n->next)
		atomic_store(&list_entry(n, struct iojob, node)->cancel, true);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	/* Completions may submit again (a job in parts): until none is left. */
	while (p->pending)
		drain_done(p);
	tc_io_free(p->io);
	if (p->efd >= 0)
		close(p->efd);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
	return NULL;
}

struct iojob *iopool_submit(struct iopool *p, iojob_run_fn run, iojob_done_fn done, void *arg)
{
	struct iojob *job = xcalloc(1, sizeof(*job));
	job->run = run;
	job->done = done;
	job->arg = arg;
	atomic_init(&job->cancel, false);
	p->pending++;
	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		/* A completion run at shutdown queued more work: it never
		 * starts, and is told cancelled. */
		atomic_store(&job->cancel, true);
		list_insert_tail(&p->done, &job->node);
		pthread_mutex_unlock(&p->mu);
		return job;
	}
	list_insert_tail(&p->queue, &job->node);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return job;
}

void iojob_cancel(struct iojob *job)
{
	atomic_store(&job->cancel, true);
}

bool iojob_cancelled(const struct iojob *job)
{
	return atomic_load(&((struct iojob *)job)->cancel);
}

unsigned iopool_pending(const struct iopool *p)
{
	return p->pending;
}
