//! The phone numbers of the pumping scenario: the honest users' countries and prefixes, the
//! prefixes a bot attacks, and valid mobile numbers drawn from either. The service sends SMS
//! only to mobile (and fixed-line-or-mobile) numbers of served countries, so every number
//! drawn here is one libphonenumber calls valid and mobile; the tests check each prefix.

use rand::RngExt;
use rand::rngs::StdRng;

/// A range of numbers: an E.164 prefix and the length of the whole number (digits after `+`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// ISO 3166 region, as `VCODE_ALLOWED_REGIONS` names it.
    pub region: &'static str,
    /// `+` and the leading digits, e.g. `+447911`.
    pub e164: &'static str,
    /// Digits after the `+` of every number in the range.
    pub digits: usize,
}

impl Prefix {
    const fn new(region: &'static str, e164: &'static str, digits: usize) -> Self {
        Self {
            region,
            e164,
            digits,
        }
    }

    /// A number of the range, its remaining digits uniform; for a mail domain (`e164`
    /// `@domain`), an address of it, its 12-letter mailbox random.
    pub fn draw(&self, rng: &mut StdRng) -> String {
        if self.e164.starts_with('@') {
            let mut address: String = (0..12)
                .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
                .collect();
            address.push_str(self.e164);
            return address;
        }
        let free = self.digits + 1 - self.e164.len();
        let mut number = String::with_capacity(self.digits + 1);
        number.push_str(self.e164);
        for _ in 0..free {
            number.push(char::from(b'0' + rng.random_range(0..10u8)));
        }
        number
    }
}

/// Where honest users live: four countries, three mobile ranges each (US numbers are
/// fixed-line-or-mobile, as every North American number is). None shares more than the calling
/// code and one digit with a [`BOT_PREFIXES`] range, so a guard judging prefixes of the calling
/// code plus two or more digits never puts an honest user beside the bot.
pub const HONEST_PREFIXES: [Prefix; 12] = [
    Prefix::new("CN", "+86139", 13),
    Prefix::new("CN", "+86186", 13),
    Prefix::new("CN", "+86150", 13),
    Prefix::new("GB", "+447400", 12),
    Prefix::new("GB", "+447825", 12),
    Prefix::new("GB", "+447983", 12),
    Prefix::new("US", "+12127", 11),
    Prefix::new("US", "+14154", 11),
    Prefix::new("US", "+16463", 11),
    Prefix::new("DE", "+491512", 13),
    Prefix::new("DE", "+491523", 13),
    Prefix::new("DE", "+491601", 12),
];

/// The ranges a bot pumps, in the order `--bot-prefixes N` takes them: mobile ranges of the
/// honest users' countries (the guard has to tell a range from its country), each with the
/// calling code and four more digits fixed.
pub const BOT_PREFIXES: [Prefix; 6] = [
    Prefix::new("GB", "+447537", 12),
    Prefix::new("DE", "+491779", 13),
    Prefix::new("CN", "+861709", 13),
    Prefix::new("US", "+13057", 11),
    Prefix::new("GB", "+447588", 12),
    Prefix::new("CN", "+861992", 13),
];

/// Spread pumping (issue 39): forty Chinese mobile ranges of the calling code and three
/// digits, none an honest user's, which a bot with `--bot-spread` sends into at random, so
/// that each range alone sees a send every 13 s at 3 a second.
pub const SPREAD_PREFIXES: [Prefix; 40] = [
    Prefix::new("CN", "+86130", 13),
    Prefix::new("CN", "+86131", 13),
    Prefix::new("CN", "+86132", 13),
    Prefix::new("CN", "+86133", 13),
    Prefix::new("CN", "+86135", 13),
    Prefix::new("CN", "+86136", 13),
    Prefix::new("CN", "+86137", 13),
    Prefix::new("CN", "+86138", 13),
    Prefix::new("CN", "+86151", 13),
    Prefix::new("CN", "+86152", 13),
    Prefix::new("CN", "+86153", 13),
    Prefix::new("CN", "+86155", 13),
    Prefix::new("CN", "+86156", 13),
    Prefix::new("CN", "+86157", 13),
    Prefix::new("CN", "+86158", 13),
    Prefix::new("CN", "+86159", 13),
    Prefix::new("CN", "+86166", 13),
    Prefix::new("CN", "+86173", 13),
    Prefix::new("CN", "+86175", 13),
    Prefix::new("CN", "+86176", 13),
    Prefix::new("CN", "+86177", 13),
    Prefix::new("CN", "+86178", 13),
    Prefix::new("CN", "+86180", 13),
    Prefix::new("CN", "+86181", 13),
    Prefix::new("CN", "+86182", 13),
    Prefix::new("CN", "+86183", 13),
    Prefix::new("CN", "+86184", 13),
    Prefix::new("CN", "+86185", 13),
    Prefix::new("CN", "+86187", 13),
    Prefix::new("CN", "+86188", 13),
    Prefix::new("CN", "+86189", 13),
    Prefix::new("CN", "+86191", 13),
    Prefix::new("CN", "+86193", 13),
    Prefix::new("CN", "+86195", 13),
    Prefix::new("CN", "+86196", 13),
    Prefix::new("CN", "+86197", 13),
    Prefix::new("CN", "+86198", 13),
    Prefix::new("CN", "+86199", 13),
    Prefix::new("CN", "+86147", 13),
    Prefix::new("CN", "+86172", 13),
];

/// The busy prefix (issue 39, `--busy-prefix`): every honest user's, and the one the bot pumps
/// with random numbers of it.
pub const BUSY_PREFIX: Prefix = Prefix::new("CN", "+86138", 13);

/// The busy mail domain (`--busy-prefix --mail`): every honest user's, and the one the bot
/// sends to with random mailboxes of it. The guard counts mail by domain under `EMAIL`.
pub const BUSY_DOMAIN: Prefix = Prefix::new("EMAIL", "@gmail.com", 0);

/// The regions the honest users and the bot need served (`VCODE_ALLOWED_REGIONS`), sorted.
pub fn regions() -> Vec<&'static str> {
    let mut regions: Vec<_> = HONEST_PREFIXES
        .iter()
        .chain(&BOT_PREFIXES)
        .map(|prefix| prefix.region)
        .collect();
    regions.sort_unstable();
    regions.dedup();
    regions
}

#[cfg(test)]
mod tests {
    use super::*;
    use phonenumber::Type;
    use rand::SeedableRng;

    #[test]
    fn a_mail_domain_draws_random_mailboxes_of_it() {
        let mut rng = StdRng::seed_from_u64(7);
        let (one, two) = (BUSY_DOMAIN.draw(&mut rng), BUSY_DOMAIN.draw(&mut rng));
        assert_ne!(one, two);
        for address in [one, two] {
            let (mailbox, domain) = address.split_once('@').expect("an address");
            assert_eq!(domain, "gmail.com");
            assert_eq!(mailbox.len(), 12);
            assert!(mailbox.bytes().all(|b| b.is_ascii_lowercase()), "{address}");
        }
    }

    /// Valid, mobile (or fixed-line-or-mobile), in its region, and written in E.164.
    fn check_number(prefix: &Prefix, number: &str) {
        let parsed = phonenumber::parse(None, number).expect("a phone number");
        assert!(parsed.is_valid(), "{number} of {prefix:?} is not valid");
        let number_type = parsed.number_type(&phonenumber::metadata::DATABASE);
        assert!(
            matches!(number_type, Type::Mobile | Type::FixedLineOrMobile),
            "{number} of {prefix:?} is {number_type:?}"
        );
        let region = parsed.country().id().map(|id| id.as_ref().to_owned());
        assert_eq!(region.as_deref(), Some(prefix.region), "{number}");
        let e164 = parsed.format().mode(phonenumber::Mode::E164).to_string();
        assert_eq!(e164, number);
        assert!(number.starts_with(prefix.e164));
    }

    #[test]
    fn every_number_drawn_is_a_valid_mobile_of_its_region() {
        let mut rng = StdRng::seed_from_u64(25);
        for prefix in HONEST_PREFIXES
            .iter()
            .chain(&BOT_PREFIXES)
            .chain(&SPREAD_PREFIXES)
        {
            for _ in 0..300 {
                check_number(prefix, &prefix.draw(&mut rng));
            }
            // The range's ends too: all zeros and all nines after the prefix.
            let free = prefix.digits + 1 - prefix.e164.len();
            for digit in ["0", "9"] {
                check_number(prefix, &format!("{}{}", prefix.e164, digit.repeat(free)));
            }
        }
    }

    #[test]
    fn the_bot_pumps_ranges_no_honest_user_shares() {
        for bot in &BOT_PREFIXES {
            for honest in &HONEST_PREFIXES {
                // The calling code plus two digits already tell them apart.
                let common = bot
                    .e164
                    .bytes()
                    .zip(honest.e164.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let calling_code = match bot.region {
                    "US" => 2,
                    _ => 3,
                };
                assert!(
                    common < calling_code + 2,
                    "{} and {} share {common} characters",
                    bot.e164,
                    honest.e164
                );
            }
        }
        assert_eq!(regions(), ["CN", "DE", "GB", "US"]);
        // The spread bot's ranges are its own: none is an honest user's, none repeats.
        let mut spread: Vec<&str> = SPREAD_PREFIXES.iter().map(|p| p.e164).collect();
        spread.sort_unstable();
        spread.dedup();
        assert_eq!(spread.len(), SPREAD_PREFIXES.len());
        for honest in &HONEST_PREFIXES {
            assert!(
                SPREAD_PREFIXES
                    .iter()
                    .all(|p| !honest.e164.starts_with(p.e164)),
                "{}",
                honest.e164
            );
        }
    }

    #[test]
    fn draws_follow_the_seed() {
        let prefix = &BOT_PREFIXES[0];
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..5).map(|_| prefix.draw(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
