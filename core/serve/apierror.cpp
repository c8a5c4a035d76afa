#include "serve/apierror.h"

namespace once {

ApiError apiError(ApiFailure failure, const QString &message, const QString &field)
{
    ApiError error;
    error.message = message;
    switch (failure) {
    case ApiFailure::BadRequest:
        error = {400, "bad_request", message, field};
        break;
    case ApiFailure::Unauthorized:
        error = {401, "unauthorized", message};
        break;
    case ApiFailure::Forbidden:
        error = {403, "forbidden", message};
        break;
    case ApiFailure::NotFound:
        error = {404, "not_found", message};
        break;
    case ApiFailure::UnknownQueue:
        error = {404, "unknown_queue", message, QStringLiteral("queue")};
        break;
    case ApiFailure::MethodNotAllowed:
        error = {405, "method_not_allowed", message};
        break;
    case ApiFailure::UnknownHost:
        error = {421, "unknown_host", message};
        break;
    case ApiFailure::UnsupportedMediaType:
        error = {415, "unsupported_media_type", message};
        break;
    case ApiFailure::LeaseLost:
        error = {409, "lease_lost", message, QStringLiteral("message_id")};
        break;
    case ApiFailure::TooLarge:
        error = {413, "payload_too_large", message, field};
        break;
    case ApiFailure::BadReminder:
        error = {422, "invalid_reminder", message, field.isEmpty() ? QStringLiteral("payload") : field};
        break;
    case ApiFailure::KeyReused:
        error = {422, "idempotency_key_reused", message, field.isEmpty() ? QStringLiteral("idempotency_key") : field};
        break;
    case ApiFailure::RateLimited:
        error = {429, "rate_limited", message, {}, true};
        break;
    case ApiFailure::StoreUnavailable:
        error = {503, "store_unavailable", message, {}, true};
        break;
    case ApiFailure::Internal:
        error = {500, "internal", message};
        break;
    }
    return error;
}

QJsonObject ApiError::toJson() const
{
    QJsonObject inner{{QStringLiteral("code"), QString::fromLatin1(code)}, {QStringLiteral("message"), message}};
    if (!field.isEmpty())
        inner.insert(QStringLiteral("field"), field);
    return QJsonObject{{QStringLiteral("error"), inner}};
}

} // namespace once
