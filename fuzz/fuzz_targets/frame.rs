//! The frame decoder over an arbitrary byte stream: every frame it yields goes to the
//! message decoder. Nothing may panic, and no allocation may exceed the frame limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = std::io::Cursor::new(data);
    while let Ok(frame) = net::read_frame(&mut r, 1 << 16) {
        let _ = protocol::decode(&frame);
    }
});
