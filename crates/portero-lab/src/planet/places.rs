//! Where the isolates are, and how far each is from the one object.
//!
//! The figures are derived, not measured: the great-circle distance between two places,
//! travelled at 200 km per millisecond (light in optical fibre, about two thirds of its
//! speed in vacuum), lengthened by 1.5 for the detours real routes take (measurement
//! studies of internet paths find most between 1.3 and 2 times the great-circle
//! distance), there and back; plus 0.7 ms for the call itself, the Durable Object's own
//! share measured in workerd on one machine (BENCHMARKS.md, "The edge, exact"). The named
//! places are 40 large cities on every continent where edge networks have locations;
//! beyond 40, each further location is placed near one of them (a deterministic offset of
//! up to about 600 km), standing for a smaller city of the same region.

/// A place: its name, latitude and longitude (degrees).
pub type Place = (&'static str, f64, f64);

/// The named places (`cities.csv`), in the order traffic favours them (the first is
/// where the object lives: an object is created near the location that first uses it).
pub fn cities() -> Vec<Place> {
    include_str!("cities.csv")
        .lines()
        .skip(1)
        .map(|line| {
            let mut fields = line.split(',');
            let mut next = || fields.next().expect("name,latitude,longitude");
            let name = next();
            let degrees = |f: &str| f.parse::<f64>().expect("degrees");
            (name, degrees(next()), degrees(next()))
        })
        .collect()
}

/// Light in fibre, km per ms.
const FIBRE_KM_PER_MS: f64 = 200.0;
/// How much longer real routes are than the great circle.
const DETOUR: f64 = 1.5;
/// The object call's own cost (ms): RPC and the decision, at no distance.
pub const CALL_MS: f64 = 0.7;
const EARTH_KM: f64 = 6_371.0;

/// The `i`-th location: a named city, or beyond them one near a city (its region).
pub fn location(i: usize) -> (String, f64, f64) {
    let cities = cities();
    let (name, lat, lon) = cities[i % cities.len()];
    if i < cities.len() {
        return (name.to_owned(), lat, lon);
    }
    // A fixed offset per index: up to ±4° of latitude and ±5° of longitude.
    let round = (i / cities.len()) as f64;
    let spin = (i as f64 * 2.399_963).sin_cos(); // the golden angle: spread, not stacked
    let (dlat, dlon) = (
        4.0 * spin.0 * (round / 7.0).min(1.0),
        5.0 * spin.1 * (round / 7.0).min(1.0),
    );
    let name = format!("near {name} {}", i / cities.len());
    (name, (lat + dlat).clamp(-89.0, 89.0), lon + dlon)
}

/// The great-circle distance (km) between two places (haversine).
pub fn distance_km(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (la1, lo1, la2, lo2) = (
        a.0.to_radians(),
        a.1.to_radians(),
        b.0.to_radians(),
        b.1.to_radians(),
    );
    let h = ((la2 - la1) / 2.0).sin().powi(2)
        + la1.cos() * la2.cos() * ((lo2 - lo1) / 2.0).sin().powi(2);
    2.0 * EARTH_KM * h.sqrt().min(1.0).asin()
}

/// The round trip (ms) of an object call from location `i` to the object at location 0.
pub fn round_trip_ms(i: usize) -> f64 {
    let (_, lat, lon) = location(i);
    let (_, olat, olon) = location(0);
    2.0 * distance_km((lat, lon), (olat, olon)) * DETOUR / FIBRE_KM_PER_MS + CALL_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_plausible() {
        // Frankfurt to itself: the call alone; to London ~640 km; to Sydney ~16,500 km.
        assert_eq!(round_trip_ms(0), CALL_MS);
        let london = round_trip_ms(2);
        assert!((9.0..11.0).contains(&london), "{london}");
        let sydney = round_trip_ms(7);
        assert!((240.0..260.0).contains(&sydney), "{sydney}");
        // Every location of a 300-location planet is somewhere on it.
        assert!((0..300).all(|i| (0.0..350.0).contains(&round_trip_ms(i))));
    }
}
