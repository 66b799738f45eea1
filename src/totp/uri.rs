//! What an authenticator app is handed at enrolment: the `otpauth://totp/…` URI of Google's
//! Key URI Format (which every authenticator reads) and a QR code of it as a PNG.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::TotpConfig;

/// Everything but RFC 3986's unreserved characters is escaped: a space is `%20` (never `+`,
/// which apps would show), `:` in an issuer or account name `%3A` (the label's one literal
/// `:` separates them), `@` and non-ASCII as UTF-8 percent-escapes.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `otpauth://totp/<issuer>:<account>?secret=…&issuer=…&algorithm=…&digits=…&period=…`: the
/// secret in unpadded base32, the issuer both in the label and as a parameter (as the
/// format recommends), the settings always written out (some apps ignore what is left out).
pub fn otpauth_uri(
    issuer: &str,
    account: &str,
    secret_base32: &str,
    config: &TotpConfig,
) -> String {
    let issuer = utf8_percent_encode(issuer, ESCAPED).to_string();
    let account = utf8_percent_encode(account, ESCAPED);
    format!(
        "otpauth://totp/{issuer}:{account}?secret={secret_base32}&issuer={issuer}&algorithm={}&digits={}&period={}",
        config.algorithm.uri_name(),
        config.digits,
        config.step_secs
    )
}

/// Pixels a module, and modules of quiet zone each side (the QR standard's four).
const SCALE: usize = 8;
const QUIET: usize = 4;

/// A QR code of `text` as an 8-bit greyscale PNG, 8 pixels a module with the standard quiet
/// zone, error correction level M.
pub fn qr_png(text: &str) -> Result<Vec<u8>, String> {
    let code = qrcode::QrCode::with_error_correction_level(text, qrcode::EcLevel::M)
        .map_err(|error| error.to_string())?;
    let width = code.width();
    let colors = code.to_colors();
    let side = (width + 2 * QUIET) * SCALE;
    let mut pixels = vec![255u8; side * side];
    for (index, color) in colors.iter().enumerate() {
        if *color != qrcode::Color::Dark {
            continue;
        }
        let (x, y) = (index % width + QUIET, index / width + QUIET);
        for row in y * SCALE..(y + 1) * SCALE {
            pixels[row * side + x * SCALE..row * side + (x + 1) * SCALE].fill(0);
        }
    }
    let mut out = Vec::with_capacity(side * side / 8);
    {
        let mut encoder = png::Encoder::new(&mut out, side as u32, side as u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(|error| error.to_string())?;
        writer
            .write_image_data(&pixels)
            .map_err(|error| error.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::totp::Algorithm;

    #[test]
    fn issuer_and_account_are_escaped_as_apps_read_them() {
        let config = TotpConfig {
            algorithm: Algorithm::Sha256,
            digits: 8,
            step_secs: 30,
            skew: 1,
        };
        let uri = otpauth_uri("Acme Co", "alice@example.com: work", "JBSWY3DP", &config);
        assert_eq!(
            uri,
            "otpauth://totp/Acme%20Co:alice%40example.com%3A%20work?secret=JBSWY3DP&issuer=Acme%20Co&algorithm=SHA256&digits=8&period=30"
        );
    }

    #[test]
    fn the_qr_code_is_a_png_with_a_quiet_zone() {
        let png = qr_png("otpauth://totp/a:b?secret=JBSWY3DP").unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let decoder = png::Decoder::new(std::io::Cursor::new(&png));
        let reader = decoder.read_info().unwrap();
        let info = reader.info();
        assert_eq!(info.width, info.height);
        assert_eq!(info.width as usize % SCALE, 0);
    }
}
