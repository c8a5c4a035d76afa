#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QString>

namespace once {

// Every way a request to `once serve` can fail, as the API names it. One place decides
// each failure's HTTP status and code, so the same failure never answers two ways.
enum class ApiFailure {
    BadRequest,       // a field missing or malformed: 400, names the field
    Unauthorized,     // no bearer token, or one that is not in the tokens file: 401
    Forbidden,        // the token's role may not do this: 403
    NotFound,         // no such endpoint: 404
    UnknownQueue,     // a queue this server does not serve: 404
    MethodNotAllowed, // the endpoint exists under another method: 405
    UnknownHost,      // the Host header names no name this server answers to: 421
    UnsupportedMediaType, // a body that is not declared application/json: 415
    LeaseLost,        // ack/nack/extend of a delivery whose lease went to another consumer: 409
    TooLarge,         // a payload over 256 KiB, or a request body over its limit: 413
    BadReminder,      // the payload is not a reminder `once enqueue` would accept: 422
    KeyReused,        // an idempotency key the producer used within 24 h for another message: 422
    RateLimited,      // the token's configured rate is exceeded: 429 + Retry-After
    StoreUnavailable, // the store did not answer or refused: 503 + Retry-After
    Internal,         // a bug: 500
};

struct ApiError
{
    int status = 500;
    QByteArray code;
    QString message;
    QString field{}; // BadRequest: the field at fault ("body" for the request as a whole)
    bool retryAfter{}; // the answer carries Retry-After

    // {"error": {"code": ..., "message": ..., "field"?: ...}}
    QJsonObject toJson() const;
};

ApiError apiError(ApiFailure failure, const QString &message, const QString &field = {});

} // namespace once
