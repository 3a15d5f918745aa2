//! The server as a process: started on loopback ports of its own with a
//! configuration file, its stderr collected, stopped by its own id when dropped; and
//! one HTTP/1.1 exchange with it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The server's process, stopped by its own id when the test ends.
pub struct Server {
    child: Child,
    /// Where its gRPC service listens.
    pub grpc: String,
    /// Where its HTTP side listens.
    pub http: String,
    /// What it said on stderr so far.
    pub said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its configuration file.
    pub file: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary started with `config` as its file, and `extra` arguments.
pub fn start(name: &str, config: &str, extra: &[&str]) -> Server {
    let dir = std::env::temp_dir().join(format!("portero-server-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rl.yaml");
    std::fs::write(&file, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_portero-server"))
        .args([
            "--config",
            file.to_str().unwrap(),
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let errors = BufReader::new(child.stderr.take().unwrap());
    let into = said.clone();
    std::thread::spawn(move || {
        for line in errors.lines().map_while(Result::ok) {
            eprintln!("server: {line}");
            into.lock().unwrap().push(line);
        }
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            .to_string()
    };
    Server {
        grpc: field("grpc="),
        http: field("http="),
        child,
        said,
        file,
    }
}

/// One HTTP/1.1 exchange: the status and the body.
pub fn http(at: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(at).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// Waits out the end of an aligned window of `window_secs` if it is under
/// `margin_secs` away: a test that counts in such windows must not see one end.
pub fn clear_of(window_secs: u64, margin_secs: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let window = window_secs * 1_000;
    let left = window - now % window;
    if left < margin_secs * 1_000 {
        std::thread::sleep(std::time::Duration::from_millis(left + 100));
    }
}

/// One kept-alive HTTP/1.1 connection (for load: a new connection per request runs
/// a loopback's ports out), made again after an error.
pub struct KeptAlive {
    at: String,
    stream: Option<BufReader<TcpStream>>,
}

impl KeptAlive {
    /// A connection to `at`, made on first use.
    pub fn to(at: &str) -> Self {
        Self {
            at: at.to_string(),
            stream: None,
        }
    }

    /// POSTs `body` to `path`: the status, or 0 when no answer came (the connection
    /// is dropped and made again next time).
    pub fn post(&mut self, path: &str, body: &str) -> u16 {
        match self.exchange(path, body) {
            Ok(status) => status,
            Err(_) => {
                self.stream = None;
                0
            }
        }
    }

    fn exchange(&mut self, path: &str, body: &str) -> std::io::Result<u16> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.at)?;
            stream.set_nodelay(true)?;
            self.stream = Some(BufReader::new(stream));
        }
        let stream = self.stream.as_mut().unwrap();
        // One write: a request in pieces waits on the peer's delayed acknowledgement.
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.get_mut().write_all(request.as_bytes())?;
        let mut line = String::new();
        stream.read_line(&mut line)?;
        let status = line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("status line {line:?}")))?;
        let mut length = 0;
        loop {
            let mut header = String::new();
            stream.read_line(&mut header)?;
            if header == "\r\n" || header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut rest = vec![0; length];
        stream.read_exact(&mut rest)?;
        Ok(status)
    }
}
