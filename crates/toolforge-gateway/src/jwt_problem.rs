//! A refused JWT's reason in words for people (the JWKS file's tokens and the OAuth issuers'
//! alike): what was wrong, never the token.

pub(crate) fn jwt_problem(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the JWT has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the JWT is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidIssuer => "the JWT's issuer (iss) is not the expected one".to_owned(),
        ErrorKind::InvalidAudience => "the JWT's audience (aud) is not this gateway".to_owned(),
        ErrorKind::InvalidSignature => "the JWT's signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the JWT has no {claim} claim"),
        _ => format!("the JWT was refused ({e})"),
    }
}
