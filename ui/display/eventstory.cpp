#include "display/eventstory.h"

#include "display/humanunits.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QHash>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QPixmap>

namespace once::ui {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::ui::EventStory", text);
}

// "HTTP 200 in 12 ms (req_123)", leaving out what the row does not know.
QString callFacts(const Attempt &a)
{
    QStringList parts;
    if (a.httpStatus)
        parts << tr("HTTP %1").arg(a.httpStatus);
    if (a.latencyMs >= 0)
        parts << tr("in %1").arg(preciseDuration(a.latencyMs));
    QString text = parts.join(QLatin1Char(' '));
    if (!a.providerRequestId.isEmpty())
        text += (text.isEmpty() ? QString() : QStringLiteral(" ")) + QStringLiteral("(") +
                a.providerRequestId + QStringLiteral(")");
    return text;
}

// Which delivery a history row is about: each has its own message and, from the producer,
// its own event id (a duplicate's differs from the event's first), which support looks up.
QString deliveryOf(const Attempt &a)
{
    if (a.messageId.isEmpty())
        return QString();
    if (a.eventId.isEmpty())
        return tr("delivery %1 of message %2").arg(QString::number(a.delivery), a.messageId);
    return tr("delivery %1 of message %2, event %3").arg(QString::number(a.delivery), a.messageId, a.eventId);
}

QString claimSummary(const Attempt &a)
{
    const QString delivery = deliveryOf(a);
    if (a.outcome == QLatin1String("claimed") || a.outcome.isEmpty()) {
        const QString by = a.workerId.isEmpty() ? tr("Claimed") : tr("Claimed by worker %1").arg(a.workerId);
        return delivery.isEmpty() ? by : by + QStringLiteral(" (") + delivery + QStringLiteral(")");
    }
    if (a.outcome == QLatin1String("duplicate")) {
        const QString why = tr("Duplicate delivery suppressed: %1")
                                .arg(a.error.isEmpty() ? tr("the key was already taken") : a.error);
        return delivery.isEmpty() ? why : why + QStringLiteral(" (") + delivery + QStringLiteral(")");
    }
    if (a.outcome == QLatin1String("resend"))
        return tr("In doubt: resent with the same key");
    if (a.outcome == QLatin1String("held"))
        return tr("In doubt: held for an operator");
    if (a.outcome == QLatin1String("busy"))
        return tr("Came back while its own claim was still live: left for later");
    return tr("Claim: %1").arg(a.outcome);
}

QString sendSummary(const Attempt &a)
{
    const QString facts = callFacts(a);
    const QString cls =
        a.errorClass.isEmpty() ? QString() : QStringLiteral(" [") + a.errorClass + QStringLiteral("]");
    if (a.outcome == QLatin1String("applied"))
        return (facts.isEmpty() ? tr("Sent") : tr("Sent: %1").arg(facts)) + tr(", recorded and acked");
    if (a.outcome == QLatin1String("transient"))
        return (facts.isEmpty() ? tr("Send failed") : tr("Send failed: %1").arg(facts)) + cls;
    if (a.outcome == QLatin1String("in-doubt"))
        return tr("In doubt: no answer after the request was written; will resend with the same key");
    if (a.outcome == QLatin1String("held"))
        return tr("In doubt: no answer after the request was written; held for an operator");
    if (a.outcome == QLatin1String("permanent"))
        return (facts.isEmpty() ? tr("Rejected") : tr("Rejected: %1").arg(facts)) + cls;
    return tr("Send: %1").arg(a.outcome);
}

// Who did it and under which audit log row (an older store's rows know neither), then the
// reason the operator gave: short, so that the reason fits the story's column.
QString operatorSummary(const Attempt &a)
{
    const QString who = a.workerId.isEmpty() ? tr("an operator") : a.workerId;
    QString text;
    if (a.outcome == QLatin1String("resend"))
        text = a.workerId.isEmpty() ? tr("Operator chose to resend with the same key")
                                    : tr("%1 chose to resend with the same key").arg(who);
    else if (a.outcome == QLatin1String("marked-delivered"))
        text =
            a.workerId.isEmpty() ? tr("Operator marked it delivered") : tr("%1 marked it delivered").arg(who);
    else if (a.outcome == QLatin1String("redriven"))
        text = tr("Redriven by %1").arg(who);
    else if (a.outcome == QLatin1String("discarded"))
        text = tr("Dead letter discarded by %1").arg(who);
    else
        text = tr("Operator: %1").arg(a.outcome);
    if (a.auditId > 0)
        text += tr(" (audit #%1)").arg(a.auditId);
    // The reason is the operator's own text; quoted so that it reads as theirs.
    if (!a.error.isEmpty() && a.auditId > 0)
        text += tr(": “%1”").arg(a.error);
    return text;
}

} // namespace

QString attemptSummary(const Attempt &a)
{
    if (a.step == QLatin1String("claim"))
        return claimSummary(a);
    if (a.step == QLatin1String("send"))
        return sendSummary(a);
    if (a.step == QLatin1String("retry")) {
        if (a.latencyMs >= 0)
            return tr("Retry scheduled in %1").arg(preciseDuration(a.latencyMs));
        return tr("Retry scheduled");
    }
    if (a.step == QLatin1String("dead-letter"))
        return tr("Dead-lettered: %1").arg(a.errorClass.isEmpty() ? a.outcome : a.errorClass);
    if (a.step == QLatin1String("ack"))
        return tr("Acked without sending");
    if (a.step == QLatin1String("operator"))
        return operatorSummary(a);
    // What the partner said when asked for the key, and what the provider reported after
    // it took the message: the history row holds the words (Operations::recordLookup,
    // Operations::recordPartnerEvent).
    if (a.step == QLatin1String("reconcile"))
        return a.error.isEmpty() ? tr("Asked the partner: %1").arg(a.outcome) : a.error;
    if (a.step == QLatin1String("partner-event"))
        return tr("The provider reported: %1").arg(a.error.isEmpty() ? a.outcome : a.error);
    return a.step + QLatin1Char(' ') + a.outcome;
}

QString stateDescription(const QString &state)
{
    if (state == EventState::Queued)
        return tr("Queued: the message waits in the queue; no worker has picked it up yet");
    if (state == LedgerState::Claimed)
        return tr("Claimed: a worker holds the key and may be sending");
    if (state == LedgerState::Retrying)
        return tr("Retrying: a send failed for now; the message waits for its retry");
    if (state == LedgerState::Applied)
        return tr("Applied: the partner accepted it; final");
    if (state == LedgerState::InDoubt)
        return tr("In doubt: the outcome is unknown; held for an operator");
    if (state == LedgerState::Dead)
        return tr("Dead: dead-lettered; an operator may redrive it");
    if (state == LedgerState::Expired)
        return tr("Expired: its reminder's expiry passed before it could be sent; not sent, final");
    return state;
}

QColor stateColor(const QString &state)
{
    if (state == LedgerState::Applied)
        return QColor(0x2b, 0x8a, 0x3e);
    if (state == LedgerState::Claimed)
        return QColor(0x19, 0x71, 0xc2);
    if (state == LedgerState::Retrying)
        return QColor(0xd9, 0x48, 0x0f);
    if (state == LedgerState::InDoubt)
        return QColor(0x9c, 0x36, 0xb5);
    if (state == LedgerState::Dead)
        return QColor(0xe0, 0x31, 0x31);
    if (state == LedgerState::Expired) // an outcome, not a failure: muted, not red
        return QColor(0x6c, 0x75, 0x7d);
    return QColor(0x86, 0x8e, 0x96);
}

QIcon stateIcon(const QString &state)
{
    static QHash<QString, QIcon> cache;
    if (const auto it = cache.constFind(state); it != cache.cend())
        return *it;

    constexpr int Size = 32; // drawn at twice the size, shown at 16 px: crisp on high-dpi too
    QPixmap pixmap(Size, Size);
    pixmap.fill(Qt::transparent);
    {
        QPainter p(&pixmap);
        p.setRenderHint(QPainter::Antialiasing);
        p.setPen(Qt::NoPen);
        p.setBrush(stateColor(state));
        p.drawEllipse(QRectF(1, 1, Size - 2, Size - 2));
        QPen pen(Qt::white, 3.5, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        if (state == LedgerState::Applied) {
            QPainterPath check;
            check.moveTo(9, 16.5);
            check.lineTo(14, 21.5);
            check.lineTo(23, 11);
            p.drawPath(check);
        } else if (state == LedgerState::Claimed) {
            p.setPen(Qt::NoPen);
            p.setBrush(Qt::white);
            QPainterPath play;
            play.moveTo(12, 9);
            play.lineTo(23, 16);
            play.lineTo(12, 23);
            play.closeSubpath();
            p.drawPath(play);
        } else if (state == LedgerState::Retrying) {
            // A clock: waiting for its next try.
            p.drawLine(QPointF(16, 16), QPointF(16, 8.5));
            p.drawLine(QPointF(16, 16), QPointF(21.5, 19));
        } else if (state == LedgerState::InDoubt) {
            p.drawLine(QPointF(16, 8), QPointF(16, 18));
            p.drawPoint(QPointF(16, 23.5));
        } else if (state == LedgerState::Dead) {
            p.drawLine(QPointF(11, 11), QPointF(21, 21));
            p.drawLine(QPointF(21, 11), QPointF(11, 21));
        } else if (state == LedgerState::Expired) {
            // An hourglass: its time ran out.
            QPainterPath glass;
            glass.moveTo(10.5, 9);
            glass.lineTo(21.5, 9);
            glass.lineTo(10.5, 23);
            glass.lineTo(21.5, 23);
            glass.closeSubpath();
            p.drawPath(glass);
        }
    }
    pixmap.setDevicePixelRatio(2.0);
    const QIcon icon(pixmap);
    cache.insert(state, icon);
    return icon;
}

} // namespace once::ui
