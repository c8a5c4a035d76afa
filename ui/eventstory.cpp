#include "eventstory.h"

#include "humanunits.h"

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

// English plurals by hand: without a loaded translation, tr()'s %n leaves "(s)" in the text.
QString counted(qint64 n, const char *one, const char *many)
{
    return n == 1 ? tr(one) : tr(many).arg(formatCount(n));
}

QString suppressedText(qint64 duplicates)
{
    if (duplicates == 0)
        return tr("no duplicate deliveries");
    return counted(duplicates, "1 duplicate delivery suppressed", "%1 duplicate deliveries suppressed");
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
        text += (text.isEmpty() ? QString() : QStringLiteral(" ")) + QStringLiteral("(") + a.providerRequestId
              + QStringLiteral(")");
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
    const QString cls = a.errorClass.isEmpty() ? QString() : QStringLiteral(" [") + a.errorClass + QStringLiteral("]");
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
        text = a.workerId.isEmpty() ? tr("Operator marked it delivered") : tr("%1 marked it delivered").arg(who);
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

QString preciseDuration(qint64 ms)
{
    if (ms < 1000)
        return tr("%1 ms").arg(ms);
    if (ms < 60 * 1000) {
        const double seconds = double(ms) / 1000.0;
        // "12 s" rather than "12.0 s"; one decimal below ten seconds, where it matters.
        return seconds < 10 ? tr("%1 s").arg(seconds, 0, 'f', 1) : tr("%1 s").arg(qRound(seconds));
    }
    const qint64 totalSeconds = ms / 1000;
    if (totalSeconds < 3600)
        return tr("%1 min %2 s").arg(totalSeconds / 60).arg(totalSeconds % 60);
    return tr("%1 h %2 min").arg(totalSeconds / 3600).arg((totalSeconds % 3600) / 60);
}

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
    return a.step + QLatin1Char(' ') + a.outcome;
}

Verdict eventVerdict(const EventRow &event, const QList<Attempt> &attempts)
{
    int accepted = 0;
    int inDoubtCalls = 0;
    int failedCalls = 0;
    bool markedDelivered = false;
    QString discardedBy; // the last operator decision, when it was to discard
    for (const Attempt &a : attempts) {
        if (a.step == QLatin1String("operator"))
            discardedBy = a.outcome == QLatin1String("discarded") ? (a.workerId.isEmpty() ? tr("an operator") : a.workerId)
                                                                   : QString();
        if (a.step == QLatin1String("send")) {
            if (a.outcome == QLatin1String("applied"))
                ++accepted;
            else if (a.outcome == QLatin1String("in-doubt") || a.outcome == QLatin1String("held"))
                ++inDoubtCalls;
            else
                ++failedCalls;
        } else if (a.step == QLatin1String("claim") && a.outcome == QLatin1String("resend")) {
            // The holder before died between claim and record: it may have reached the partner.
            ++inDoubtCalls;
        } else if (a.step == QLatin1String("operator") && a.outcome == QLatin1String("marked-delivered")) {
            markedDelivered = true;
        }
    }
    // The ledger's counter, not the history: it is what the claim itself counted.
    const QString suppressed = suppressedText(event.duplicates);
    const QString inDoubtNote =
        inDoubtCalls ? counted(inDoubtCalls, "1 earlier call in doubt, resent with the same key",
                               "%1 earlier calls in doubt, resent with the same key")
                     : QString();

    Verdict verdict;
    if (event.state == LedgerState::Applied) {
        verdict.kind = Verdict::Kind::Delivered;
        if (accepted == 0 && markedDelivered) {
            verdict.text = tr("Delivered once, on an operator's word (marked delivered; %1)").arg(suppressed);
        } else if (accepted <= 1) {
            QString calls = accepted == 1 ? tr("1 partner call accepted") : tr("recorded as applied");
            if (!inDoubtNote.isEmpty())
                calls += QStringLiteral(", ") + inDoubtNote;
            verdict.text = tr("Delivered once (%1; %2)").arg(calls, suppressed);
        } else {
            // Only a holder that stalled past its claim and still reached the partner can
            // add a second accepted call; both carried the same Idempotency-Key.
            verdict.text = tr("Delivered once if the partner honours Idempotency-Key (%1 partner calls accepted "
                              "with the same key; %2)")
                               .arg(accepted)
                               .arg(suppressed);
        }
    } else if (event.state == LedgerState::InDoubt) {
        verdict.kind = Verdict::Kind::InDoubt;
        verdict.text = tr("In doubt: an operator must decide (the partner may or may not have it)");
    } else if (event.state == LedgerState::Dead) {
        verdict.kind = Verdict::Kind::Dead;
        QString why = event.lastErrorClass;
        if (inDoubtCalls)
            why += (why.isEmpty() ? QString() : QStringLiteral("; "))
                 + counted(inDoubtCalls, "1 earlier call was in doubt, so the partner may have it",
                           "%1 earlier calls were in doubt, so the partner may have it");
        verdict.text = why.isEmpty() ? tr("Dead-lettered: not delivered") : tr("Dead-lettered: not delivered (%1)").arg(why);
        if (!discardedBy.isEmpty())
            verdict.text += tr("; discarded by %1, so nothing will send it").arg(discardedBy);
    } else {
        verdict.kind = Verdict::Kind::Pending;
        QString detail;
        if (event.state == LedgerState::Retrying)
            detail = counted(std::max(failedCalls + inDoubtCalls, event.sends), "1 failed send, retrying",
                             "%1 failed sends, retrying");
        else
            detail = inDoubtCalls ? inDoubtNote : tr("a worker is sending it now");
        verdict.text = tr("Not delivered yet: %1").arg(detail);
    }
    return verdict;
}

QString stateDescription(const QString &state)
{
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
        }
    }
    pixmap.setDevicePixelRatio(2.0);
    const QIcon icon(pixmap);
    cache.insert(state, icon);
    return icon;
}

} // namespace once::ui
