//! The threads plain Python tools run on. Each stays attached to the interpreter for its whole
//! life and lets go of the GIL only while it waits for work, so a call costs a hand-off and a GIL
//! switch, not the thread state Python makes and frees for a thread that attaches afresh (which
//! tokio's blocking pool would do on every call, at ten times the cost of a trivial tool).
//!
//! Threads are made as calls need them (one per call running at once, at most [`MAX_WORKERS`] unless
//! [`set_max_workers`] says otherwise; past
//! it calls wait in the queue) and wait for work without end: they hold nothing but the queue, and
//! the process's exit ends them. One idle thread at a time looks for the next call for
//! [`LOOK_FOR_WORK`] before it parks: in a chain of quick calls the next one comes within
//! microseconds, and waking a parked thread costs tens (more threads looking at once would take
//! the cores from the threads that make the calls).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, unbounded};
use pyo3::prelude::*;

/// Most worker threads by default (calls of plain Python tools running at once, process-wide);
/// [`set_max_workers`] changes it.
pub const MAX_WORKERS: usize = 256;

/// The most worker threads now.
static MAX: AtomicUsize = AtomicUsize::new(MAX_WORKERS);

/// Sets the most worker threads (at least 1) and returns the former maximum. Threads made past a
/// lower maximum stay (they end with the process); no new one is made until fewer are left.
pub fn set_max_workers(max: usize) -> usize {
    MAX.swap(max.max(1), Ordering::AcqRel)
}

/// How long an idle thread looks for the next call before it parks.
pub const LOOK_FOR_WORK: Duration = Duration::from_micros(100);

/// A call to run with the GIL held.
pub type Job = Box<dyn FnOnce(Python<'_>) + Send>;

struct Pool {
    queue: Sender<Job>,
    receiver: Receiver<Job>,
    /// Threads made so far.
    threads: AtomicUsize,
    /// Threads waiting for work.
    idle: AtomicUsize,
    /// Jobs sent and not yet taken by a thread.
    queued: AtomicUsize,
    /// Whether an idle thread is looking for work (the others are parked).
    looking: AtomicBool,
}

static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let (queue, receiver) = unbounded();
        Pool {
            queue,
            receiver,
            threads: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            looking: AtomicBool::new(false),
        }
    })
}

/// Queues `job` for a worker thread, making one when the jobs waiting outnumber the idle threads
/// (and fewer than the maximum exist): a job never waits behind another while a thread could
/// be made for it. An error when no thread could be made and none exists to run it.
pub fn submit(job: Job) -> Result<(), String> {
    let pool = pool();
    let queued = pool.queued.fetch_add(1, Ordering::AcqRel) + 1;
    if queued > pool.idle.load(Ordering::Acquire) {
        let made = pool.threads.fetch_add(1, Ordering::AcqRel);
        if made < MAX.load(Ordering::Acquire) {
            let spawned = std::thread::Builder::new()
                .name("toolplan-python".into())
                .spawn(move || work(pool));
            if let Err(e) = spawned {
                pool.threads.fetch_sub(1, Ordering::AcqRel);
                if pool.threads.load(Ordering::Acquire) == 0 {
                    pool.queued.fetch_sub(1, Ordering::AcqRel);
                    return Err(format!("no thread to run the tool on: {e}"));
                }
            }
        } else {
            pool.threads.fetch_sub(1, Ordering::AcqRel);
        }
    }
    pool.queue.send(job).map_err(|_| {
        pool.queued.fetch_sub(1, Ordering::AcqRel);
        "the worker queue is closed".to_owned()
    })
}

/// A worker's life: attached to the interpreter, it waits for a job without the GIL, runs it
/// with the GIL, and waits again.
fn work(pool: &Pool) {
    Python::attach(|py| {
        loop {
            let job = py.detach(|| {
                pool.idle.fetch_add(1, Ordering::AcqRel);
                let job = next_job(pool);
                pool.idle.fetch_sub(1, Ordering::AcqRel);
                if job.is_some() {
                    pool.queued.fetch_sub(1, Ordering::AcqRel);
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

/// The next job: looked for during [`LOOK_FOR_WORK`] when no other idle thread is looking, then
/// waited for; `None` when the queue is closed.
fn next_job(pool: &Pool) -> Option<Job> {
    if !pool.looking.swap(true, Ordering::AcqRel) {
        let found = look_for_job(&pool.receiver);
        pool.looking.store(false, Ordering::Release);
        match found {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
    }
    pool.receiver.recv().ok()
}

/// [`next_job`]'s look: the queue tried again and again for [`LOOK_FOR_WORK`].
fn look_for_job(receiver: &Receiver<Job>) -> Result<Job, TryRecvError> {
    spin_until(LOOK_FOR_WORK, || match receiver.try_recv() {
        Err(TryRecvError::Empty) => None,
        found => Some(found),
    })
    .unwrap_or(Err(TryRecvError::Empty))
}

/// Asks `poll` again and again, without giving up the thread, until it answers or `limit` has
/// passed (`None` then): a wait shorter than waking a parked thread. Every 32nd try yields, so that
/// on a machine with one core the thread that brings the answer gets its turn.
pub fn spin_until<T>(limit: Duration, mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + limit;
    for spin in 1u32.. {
        if let Some(found) = poll() {
            return Some(found);
        }
        if Instant::now() >= until {
            break;
        }
        if spin % 32 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    None
}
