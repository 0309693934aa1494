//! The worker processes of a test binary (tests/dist_process.rs, tests/dist_process_gpu.rs):
//! the binary re-executed as its own `worker` test with a rank in the launcher's variables,
//! every child killed and reaped whatever happens.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// This test binary as rank `rank` of `ranks`: its `worker` test with `worker` set to `mode`,
/// `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` (loopback) and `CUFOLD_TIMEOUT` set,
/// the variables that would change how it meets the others removed, its output piped. The
/// caller adds how it meets them and starts it with [`Job::start`].
pub fn worker(worker: &str, mode: &str, rank: usize, ranks: usize, timeout_s: u64) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "worker", "--nocapture"])
        .env(worker, mode)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", ranks.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("CUFOLD_TIMEOUT", timeout_s.to_string())
        .env_remove("CUFOLD_MASTER_PORT")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .stdout(Stdio::piped());
    cmd
}

/// The children of a test, killed and reaped whatever happens.
#[derive(Default)]
pub struct Job(Vec<Child>);

impl Drop for Job {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Job {
    /// Starts `cmd` as the next child.
    pub fn start(&mut self, cmd: &mut Command) {
        self.0.push(cmd.spawn().expect("a worker process"));
    }

    /// Waits for child `i` at most `limit`: its exit status, its output, how long it took.
    pub fn finish(&mut self, i: usize, limit: Duration) -> (ExitStatus, String, Duration) {
        let t = Instant::now();
        let c = &mut self.0[i];
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < limit,
                "child {i} still running after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            o.read_to_string(&mut out).unwrap();
        }
        (status, out, t.elapsed())
    }

    /// Waits for child `i` to print `line`.
    pub fn wait_for_line(&mut self, i: usize, line: &str) {
        let out = self.0[i].stdout.take().unwrap();
        for l in BufReader::new(out).lines() {
            match l {
                Ok(l) if l.trim() == line => return,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("child {i} ended before printing {line}");
    }

    /// Child `i`, to kill or signal.
    pub fn child(&mut self, i: usize) -> &mut Child {
        &mut self.0[i]
    }
}
