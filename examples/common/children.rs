//! The ranks' processes of a job this program launched itself: each waited for within a
//! deadline (killed past it) and its standard output read; all killed and reaped whatever
//! happens.

use std::io::Read;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The ranks' processes, killed (if still running) and reaped when dropped.
pub struct Children(pub Vec<Child>);

impl Children {
    /// Waits for rank `r` until `deadline` (then kills it); its exit status and what it
    /// printed on its piped standard output.
    pub fn finish(&mut self, r: usize, deadline: Instant) -> std::io::Result<(ExitStatus, String)> {
        let c = &mut self.0[r];
        let status = loop {
            if let Some(s) = c.try_wait()? {
                break s;
            }
            if Instant::now() > deadline {
                c.kill()?;
                break c.wait()?;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            o.read_to_string(&mut out)?;
        }
        Ok((status, out))
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}
