//! A real `redis-server` for tests, benches and the example: started on a free loopback port
//! with no persistence, killed and restarted on demand, and stopped when dropped.
//!
//! `redis-server` comes from Debian's package, which `scripts/install-redis` installs (and
//! `scripts/test` runs that first). Without it, [`RedisServer::start`] fails loudly: a Redis
//! test that quietly passes without a server would prove nothing.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process on 127.0.0.1.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    ///
    /// # Panics
    /// If `redis-server` is missing or does not come up within five seconds.
    pub fn start() -> Self {
        let mut last = String::new();
        // The free port is found by binding port 0 and releasing it: another process may take
        // it in between, so a few attempts.
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("flowgate-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a scratch directory for redis-server");
            let mut server = Self {
                child: None,
                port,
                dir,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(error) => last = error,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    /// The server at `REDIS_URL` if that is set (no process of ours), or a private one started
    /// here (kept while the returned server lives), and its URL: what the examples run on.
    pub fn from_env_or_start() -> (Option<Self>, String) {
        match std::env::var("REDIS_URL") {
            Ok(url) => (None, url),
            Err(_) => {
                let server = Self::start();
                let url = server.url();
                (Some(server), url)
            }
        }
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A client for this server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a valid URL")
    }

    /// A Redis backend on this server that waits up to 10 s for an answer: on a machine whose
    /// CPUs are busy a call is answered late, never decided by the failure policy instead (a
    /// test of timeouts sets its own).
    pub fn backend(&self) -> flowgate_redis::RedisBackend {
        flowgate_redis::RedisBackend::new(self.client()).timeout(Duration::from_secs(10))
    }

    /// Runs one command on a fresh blocking connection.
    pub fn command<T: redis::FromRedisValue>(&self, command: &mut redis::Cmd) -> T {
        let mut connection = self
            .client()
            .get_connection()
            .expect("connect to the test server");
        command
            .query(&mut connection)
            .expect("a command the test server accepts")
    }

    /// Kills the server at once (`SIGKILL`: no shutdown, no goodbye to clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server's process (`SIGSTOP`): connections stay open and nothing answers, as
    /// with a server that hangs. [`resume`](Self::resume) continues it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Continues a server [`pause`](Self::pause) stopped (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("a running server");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Starts the server again on the same port (empty: nothing is persisted).
    ///
    /// # Panics
    /// If it does not come up within five seconds.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        // The port may linger for a moment after the kill.
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(error) if Instant::now() > deadline => {
                    panic!("redis-server did not restart: {error}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--enable-debug-command", "local", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| {
                format!(
                    "cannot run redis-server ({error}): run scripts/install-redis, or scripts/test"
                )
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            // Exited first: a server that could not bind must not be mistaken for another
            // process's server answering on the same port.
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "redis-server exited with {status} (port {})",
                        self.port
                    ));
                }
            }
            if self.pings() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(format!(
            "redis-server did not answer PING on port {}",
            self.port
        ))
    }

    /// Whether the server answers `PING` within 200 ms (a server in `DEBUG SLEEP` does not).
    pub fn pings(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client of a loopback port nothing listens on (a server that is not there at all).
pub fn nobody() -> redis::Client {
    redis::Client::open(format!("redis://127.0.0.1:{}/", free_port())).expect("a valid URL")
}

/// A loopback port that was free a moment ago (bound to port 0 and released): another process
/// may take it before the caller binds it, so a caller that binds it retries on failure.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("a free loopback port");
    listener.local_addr().expect("a bound address").port()
}
