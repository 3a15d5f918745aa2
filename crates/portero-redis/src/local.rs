//! A throwaway `redis-server` for tests, demos and the lab: loopback only, on a free
//! port, no persistence, stopped when dropped.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process listening on `127.0.0.1`.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let server = portero_redis::LocalRedis::start()?; // needs redis-server on PATH
/// let url = server.url(); // redis://127.0.0.1:PORT
/// # let _ = url; Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalRedis {
    child: Child,
    port: u16,
}

impl LocalRedis {
    /// Starts `redis-server` on a free loopback port and waits (up to 10 s) until it
    /// accepts connections. Fails if `redis-server` is not installed or does not
    /// come up.
    pub fn start() -> io::Result<Self> {
        // The OS picks a free port; it is handed straight to redis-server.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start redis-server ({e}); install it (Debian: apt-get install redis-server, or `cargo xtask setup`)"),
                )
            })?;
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited at start ({status}) on port {port}"
                )));
            }
            if Instant::now() > deadline {
                server.stop();
                return Err(io::Error::other(format!(
                    "redis-server did not accept connections on port {port} within 10 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server now (an outage, for tests); dropping it does the same.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LocalRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
