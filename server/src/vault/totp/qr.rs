//! Reads the `otpauth://` URI out of a QR code image (an uploaded or pasted
//! screenshot of a site's enrolment page). The image is decoded in memory
//! and dropped; it is never stored.

use std::io::Cursor;

use zeroize::Zeroizing;

use super::seed::FieldError;

/// Largest image accepted (bytes).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// Largest side of an image, in pixels (a screenshot of a 4K screen fits).
pub const MAX_SIDE_PX: u32 = 4096;

/// The text of the QR code in a PNG or JPEG image: the first code that
/// decodes to an `otpauth://` URI. Refuses an image over
/// [`MAX_IMAGE_BYTES`] or [`MAX_SIDE_PX`], one that is not a PNG or JPEG,
/// and one with no readable QR code.
pub fn decode(bytes: &[u8]) -> Result<Zeroizing<String>, FieldError> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(FieldError::new(
            "image",
            format!(
                "is {} bytes; at most {} MiB",
                bytes.len(),
                MAX_IMAGE_BYTES / (1024 * 1024)
            ),
        ));
    }
    let format = image::guess_format(bytes)
        .ok()
        .filter(|f| matches!(f, image::ImageFormat::Png | image::ImageFormat::Jpeg))
        .ok_or_else(|| FieldError::new("image", "must be a PNG or JPEG image"))?;
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE_PX);
    limits.max_image_height = Some(MAX_SIDE_PX);
    limits.max_alloc = Some(256 * 1024 * 1024);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => FieldError::new(
            "image",
            format!("is larger than {MAX_SIDE_PX}×{MAX_SIDE_PX} pixels"),
        ),
        _ => FieldError::new("image", "could not be read as a PNG or JPEG image"),
    })?;
    let mut prepared = rqrr::PreparedImage::prepare(img.to_luma8());
    let grids = prepared.detect_grids();
    if grids.is_empty() {
        return Err(FieldError::new(
            "image",
            "has no QR code Cordon can read (crop the screenshot to the code, or paste the otpauth:// link or the secret instead)",
        ));
    }
    for grid in grids {
        if let Ok((_, text)) = grid.decode() {
            let text = Zeroizing::new(text);
            if text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("otpauth://")
            {
                return Ok(text);
            }
        }
    }
    Err(FieldError::new(
        "image",
        "holds no otpauth:// QR code (is this the site's two-factor set-up code?)",
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A PNG of a QR code holding `text`, `scale` pixels a module, with
    /// a quiet zone.
    pub(crate) fn qr_png(text: &str, scale: u32) -> Vec<u8> {
        let code = qrcode::QrCode::new(text.as_bytes()).unwrap();
        let width = code.width() as u32;
        let colors = code.to_colors();
        let side = (width + 8) * scale;
        let img = image::GrayImage::from_fn(side, side, |x, y| {
            let (mx, my) = (x / scale, y / scale);
            let dark = mx >= 4
                && my >= 4
                && mx < width + 4
                && my < width + 4
                && colors[((my - 4) * width + (mx - 4)) as usize] == qrcode::Color::Dark;
            image::Luma([if dark { 0 } else { 255 }])
        });
        let mut out = Vec::new();
        img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn a_generated_qr_code_of_a_key_uri_is_read_back() {
        let uri = "otpauth://totp/ACME:me@example.com?secret=JBSWY3DPEHPK3PXP&issuer=ACME";
        let png = qr_png(uri, 6);
        assert_eq!(decode(&png).unwrap().as_str(), uri);
        let seed = super::super::Seed::from_uri(&decode(&png).unwrap()).unwrap();
        assert_eq!(seed.issuer.as_deref(), Some("ACME"));
    }

    #[test]
    fn images_that_are_not_a_key_qr_code_are_refused_by_field() {
        let not_otp = qr_png("https://example.com/", 4);
        assert!(decode(&not_otp).unwrap_err().message.contains("otpauth"));
        let blank = {
            let img = image::GrayImage::from_pixel(200, 200, image::Luma([255]));
            let mut out = Vec::new();
            img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
                .unwrap();
            out
        };
        assert!(decode(&blank).unwrap_err().message.contains("no QR code"));
        assert_eq!(decode(b"GIF89a not an image").unwrap_err().field, "image");
        let big = vec![0u8; 50 * 1024 * 1024];
        let e = decode(&big).unwrap_err();
        assert!(e.message.contains("at most 5 MiB"), "{e}");
        // A PNG header claiming 100000×100000 pixels is refused before any
        // allocation.
        let mut huge = png_header(100_000, 100_000);
        huge.extend_from_slice(&[0u8; 64]);
        let e = decode(&huge).unwrap_err();
        assert_eq!(e.field, "image");
    }

    fn png_header(w: u32, h: u32) -> Vec<u8> {
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&w.to_be_bytes());
        ihdr.extend_from_slice(&h.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        out.extend_from_slice(&13u32.to_be_bytes());
        let mut chunk = b"IHDR".to_vec();
        chunk.extend_from_slice(&ihdr);
        let crc = crc32(&chunk);
        out.extend_from_slice(&chunk);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
