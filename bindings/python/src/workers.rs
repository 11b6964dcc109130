//! The threads plain Python tools run on. Each stays attached to the interpreter for its whole
//! life and lets go of the GIL only while it waits for work, so a call costs a hand-off and a GIL
//! switch, not the thread state Python makes and frees for a thread that attaches afresh (which
//! tokio's blocking pool would do on every call, at ten times the cost of a trivial tool).
//!
//! Threads are made as calls need them (one per call running at once, at most [`MAX_WORKERS`]; past
//! it calls wait in the queue) and wait for work without end: they hold nothing but the queue, and
//! the process's exit ends them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;

/// Most worker threads (calls of plain Python tools running at once, process-wide).
pub const MAX_WORKERS: usize = 256;

/// A call to run with the GIL held.
pub type Job = Box<dyn FnOnce(Python<'_>) + Send>;

struct Pool {
    queue: Mutex<Sender<Job>>,
    receiver: Arc<Mutex<Receiver<Job>>>,
    /// Threads made so far.
    threads: AtomicUsize,
    /// Threads waiting for work.
    idle: Arc<AtomicUsize>,
    /// Jobs sent and not yet taken by a thread.
    queued: Arc<AtomicUsize>,
}

static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let (queue, receiver) = channel();
        Pool {
            queue: Mutex::new(queue),
            receiver: Arc::new(Mutex::new(receiver)),
            threads: AtomicUsize::new(0),
            idle: Arc::new(AtomicUsize::new(0)),
            queued: Arc::new(AtomicUsize::new(0)),
        }
    })
}

/// Queues `job` for a worker thread, making one when the jobs waiting outnumber the idle threads
/// (and fewer than [`MAX_WORKERS`] exist): a job never waits behind another while a thread could
/// be made for it. An error when no thread could be made and none exists to run it.
pub fn submit(job: Job) -> Result<(), String> {
    let pool = pool();
    let queued = pool.queued.fetch_add(1, Ordering::AcqRel) + 1;
    if queued > pool.idle.load(Ordering::Acquire) {
        let made = pool.threads.fetch_add(1, Ordering::AcqRel);
        if made < MAX_WORKERS {
            let receiver = Arc::clone(&pool.receiver);
            let idle = Arc::clone(&pool.idle);
            let queued = Arc::clone(&pool.queued);
            let spawned = std::thread::Builder::new()
                .name("toolplan-python".into())
                .spawn(move || work(&receiver, &idle, &queued));
            if let Err(e) = spawned {
                pool.threads.fetch_sub(1, Ordering::AcqRel);
                if pool.threads.load(Ordering::Acquire) == 0 {
                    return Err(format!("no thread to run the tool on: {e}"));
                }
            }
        } else {
            pool.threads.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let sent = pool
        .queue
        .lock()
        .map_err(|_| "the worker queue was poisoned".to_owned())
        .and_then(|q| {
            q.send(job)
                .map_err(|_| "the worker queue is closed".to_owned())
        });
    if sent.is_err() {
        pool.queued.fetch_sub(1, Ordering::AcqRel);
    }
    sent
}

/// A worker's life: attached to the interpreter, it waits for a job without the GIL, runs it
/// with the GIL, and waits again.
fn work(receiver: &Mutex<Receiver<Job>>, idle: &AtomicUsize, queued: &AtomicUsize) {
    Python::attach(|py| {
        loop {
            let job = py.detach(|| {
                idle.fetch_add(1, Ordering::AcqRel);
                let job = receiver.lock().ok().and_then(|r| r.recv().ok());
                idle.fetch_sub(1, Ordering::AcqRel);
                if job.is_some() {
                    queued.fetch_sub(1, Ordering::AcqRel);
                }
                job
            });
            match job {
                // A job reports through its own channel; one that panics drops it unanswered
                // (its call fails) and leaves the thread working.
                Some(job) => {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(py)));
                }
                None => return,
            }
        }
    });
}
