//! Handing a connected TCP socket across a unix socket (`SCM_RIGHTS`), so
//! that bytes between Chromium in a `bwrap` sandbox and the control plane
//! cross no process in between.
//!
//! The sandbox's relay accepts Chromium's proxy connections, and connects
//! to Chromium's DevTools port, on the sandbox's own loopback; it then
//! hands each of those sockets to the host over the unix socket the
//! connection came by (or went out on) and closes its own copy. The host
//! reads and writes Chromium's socket itself: the egress guard serves it
//! directly, and the CDP client's connection is joined to it in this
//! process. Before this, the relay copied every byte (each CDP message,
//! each screencast frame, each page's bytes) once more, in a process of
//! its own.
//!
//! What crosses the unix socket is untrusted: anything inside the sandbox
//! can connect to `egress.sock`, and a compromised browser could pose as
//! the relay. [`receive`] takes exactly one descriptor of one one-byte
//! message, and only a connected TCP socket (not a listener, not a unix
//! socket, not a file); every other descriptor that arrives is closed, and
//! so are those beyond its room (the kernel closes what does not fit).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::libc;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockType, SockaddrLike, SockaddrStorage, getsockname,
    getsockopt, sendmsg, sockopt,
};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// The one byte that carries a handed-over socket.
const MARK: u8 = b'S';

/// How long the host waits for the socket after the unix connection is
/// made (the relay sends it at once).
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a handed-over socket was not taken.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The unix socket failed or closed first.
    #[error("the unix socket: {0}")]
    Io(#[from] io::Error),
    /// Nothing arrived in time.
    #[error("no socket within {0:?}")]
    Timeout(Duration),
    /// The message was not one mark byte with one descriptor.
    #[error("not a handed-over socket: {0}")]
    Malformed(&'static str),
    /// The descriptor is not a connected TCP socket.
    #[error("the descriptor is not a connected TCP socket: {0}")]
    NotTcp(&'static str),
}

/// Asks for a socket over a new connection to the unix socket `path` (a
/// bwrap sandbox's `cdp.sock`, whose relay connects to Chromium's DevTools
/// and hands that socket back) and takes it, within [`RECEIVE_TIMEOUT`].
pub async fn take(path: &std::path::Path) -> Result<TcpStream, HandoverError> {
    let unix = UnixStream::connect(path).await?;
    receive(&unix, RECEIVE_TIMEOUT).await
}

/// Sends `socket` over `unix` (one mark byte with the descriptor). The
/// caller may close its own copy once this returns.
pub async fn send(unix: &UnixStream, socket: &impl AsFd) -> io::Result<()> {
    let fds = [socket.as_fd().as_raw_fd()];
    loop {
        unix.writable().await?;
        let sent = unix.try_io(Interest::WRITABLE, || {
            let cmsg = [ControlMessage::ScmRights(&fds)];
            sendmsg::<()>(
                unix.as_raw_fd(),
                &[io::IoSlice::new(&[MARK])],
                &cmsg,
                MsgFlags::MSG_NOSIGNAL,
                None,
            )
            .map_err(io::Error::from)
        });
        match sent {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(io::Error::new(io::ErrorKind::WriteZero, "nothing sent")),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Receives one handed-over TCP socket from `unix`, within `timeout`.
pub async fn receive(unix: &UnixStream, timeout: Duration) -> Result<TcpStream, HandoverError> {
    let fd = tokio::time::timeout(timeout, async {
        loop {
            unix.readable().await?;
            match unix.try_io(Interest::READABLE, || receive_fds(unix.as_raw_fd())) {
                Ok(got) => return Ok::<_, HandoverError>(got),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    })
    .await
    .map_err(|_| HandoverError::Timeout(timeout))??;
    let (bytes, mut fds) = fd;
    if bytes == 0 {
        return Err(HandoverError::Malformed("the connection closed"));
    }
    if fds.len() != 1 {
        // Dropped here: each is closed.
        return Err(HandoverError::Malformed("not exactly one descriptor"));
    }
    let fd = fds.pop().expect("one descriptor");
    let tcp = connected_tcp(fd)?;
    tcp.set_nonblocking(true)?;
    let tcp = TcpStream::from_std(tcp)?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// `fd` as a TCP stream, when it is a connected TCP socket.
fn connected_tcp(fd: OwnedFd) -> Result<std::net::TcpStream, HandoverError> {
    let kind =
        getsockopt(&fd, sockopt::SockType).map_err(|_| HandoverError::NotTcp("not a socket"))?;
    if kind != SockType::Stream {
        return Err(HandoverError::NotTcp("not a stream socket"));
    }
    if getsockopt(&fd, sockopt::AcceptConn).unwrap_or(true) {
        return Err(HandoverError::NotTcp("a listening socket"));
    }
    let local: SockaddrStorage =
        getsockname(fd.as_raw_fd()).map_err(|_| HandoverError::NotTcp("no address"))?;
    if !matches!(
        local.family(),
        Some(AddressFamily::Inet | AddressFamily::Inet6)
    ) {
        return Err(HandoverError::NotTcp("not an internet socket"));
    }
    let tcp = std::net::TcpStream::from(fd);
    // Connected: it has a peer (a socket never connected, or one whose
    // connection is still being made, has none).
    tcp.peer_addr()
        .map_err(|_| HandoverError::NotTcp("not connected"))?;
    Ok(tcp)
}

/// Room for this many descriptors in one message; the kernel closes any
/// beyond it (and flags the message truncated).
const ROOM: usize = 4;

/// One `recvmsg` on `sock` (non-blocking): the bytes read (at most one) and
/// every descriptor that came with them, each owned (closed when dropped).
fn receive_fds(sock: RawFd) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    // Exactly one `cmsghdr` and ROOM descriptors; u64s keep it aligned.
    let mut control = [0u64; 4];
    const _: () = assert!(
        std::mem::size_of::<[u64; 4]>()
            == std::mem::size_of::<libc::cmsghdr>() + ROOM * std::mem::size_of::<libc::c_int>()
    );
    // SAFETY: an all-zero `msghdr` is valid (null name, no buffers).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (one byte of `byte`) and `control`,
    // both alive and writable for the call; MSG_CMSG_CLOEXEC marks every
    // received descriptor close-on-exec atomically.
    let n = unsafe { libc::recvmsg(sock, &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `control` up to `msg.msg_controllen` with
    // well-formed control messages (truncated ones carry the descriptors
    // actually installed: their `cmsg_len` says how many); the CMSG_*
    // macros stay within that length. Each SCM_RIGHTS entry is a
    // descriptor newly installed in this process and owned by no one else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let header = data as usize - c as usize;
                let len = ((*c).cmsg_len as usize).saturating_sub(header);
                for i in 0..len / std::mem::size_of::<libc::c_int>() {
                    let raw = std::ptr::read_unaligned(
                        data.add(i * std::mem::size_of::<libc::c_int>())
                            .cast::<libc::c_int>(),
                    );
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    let n = usize::try_from(n).unwrap_or(0);
    if n == 1 && byte[0] != MARK {
        // Dropping `fds` closes whatever came with it.
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not the mark"));
    }
    Ok((n, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// How many of this process's descriptors refer to what `fd` refers
    /// to (other tests open and close descriptors meanwhile: counting all
    /// would not do).
    fn copies(fd: RawFd) -> usize {
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|t| *t == target)
            .count()
    }

    async fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }

    #[tokio::test]
    async fn a_connected_tcp_socket_crosses_and_carries_bytes() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut accepted, _) = server.accept().await.unwrap();
        let (a, b) = pair().await;
        send(&a, &client).await.unwrap();
        drop(client);
        let mut got = receive(&b, Duration::from_secs(5)).await.unwrap();
        got.write_all(b"through the handed socket").await.unwrap();
        let mut buf = [0u8; 25];
        accepted.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"through the handed socket");
        accepted.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        got.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
    }

    /// Sends `fds` with `bytes` the raw way (what a hostile sender can do).
    fn send_raw(unix: &UnixStream, bytes: &[u8], fds: &[RawFd]) {
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
        sendmsg::<()>(
            unix.as_raw_fd(),
            &[io::IoSlice::new(bytes)],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .unwrap();
    }

    #[tokio::test]
    async fn anything_but_one_connected_tcp_socket_is_refused_and_closed() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let (u1, _u2) = std::os::unix::net::UnixStream::pair().unwrap();
        let watched = [
            tcp.as_raw_fd(),
            file.as_raw_fd(),
            u1.as_raw_fd(),
            server.as_raw_fd(),
        ];
        let cases: Vec<(&str, Vec<u8>, Vec<RawFd>)> = vec![
            ("a file", vec![MARK], vec![file.as_raw_fd()]),
            ("a unix socket", vec![MARK], vec![u1.as_raw_fd()]),
            ("a listener", vec![MARK], vec![server.as_raw_fd()]),
            (
                "two sockets",
                vec![MARK],
                vec![tcp.as_raw_fd(), tcp.as_raw_fd()],
            ),
            (
                "more than there is room for",
                vec![MARK],
                vec![tcp.as_raw_fd(); ROOM + 3],
            ),
            ("no descriptor", vec![MARK], vec![]),
            ("another byte", vec![b'x'], vec![tcp.as_raw_fd()]),
        ];
        for (what, bytes, fds) in cases {
            let (a, b) = pair().await;
            send_raw(&a, &bytes, &fds);
            let got = receive(&b, Duration::from_secs(5)).await;
            assert!(got.is_err(), "{what} was taken");
            drop((a, b));
            for fd in watched {
                assert_eq!(copies(fd), 1, "{what}: a received descriptor was left open");
            }
        }
        // A connection that closes, or sends nothing in time.
        let (a, b) = pair().await;
        drop(a);
        assert!(matches!(
            receive(&b, Duration::from_secs(5)).await,
            Err(HandoverError::Malformed(_))
        ));
        let (_a, b) = pair().await;
        assert!(matches!(
            receive(&b, Duration::from_millis(50)).await,
            Err(HandoverError::Timeout(_))
        ));
    }
}
