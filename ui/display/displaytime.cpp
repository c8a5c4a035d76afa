#include "display/displaytime.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QTimeZone>

namespace once::ui {

DisplayTime &DisplayTime::instance()
{
    static DisplayTime displayTime;
    return displayTime;
}

void DisplayTime::setUtc(bool utc)
{
    if (utc == m_utc)
        return;
    m_utc = utc;
    emit changed();
}

QString DisplayTime::zoneLabel() const
{
    if (m_utc)
        return QStringLiteral("UTC");
    return QCoreApplication::translate("once::ui::DisplayTime", "local, %1")
        .arg(QTimeZone::systemTimeZone().displayName(QDateTime::currentDateTime(), QTimeZone::OffsetName));
}

QString DisplayTime::zoneAbbreviation() const
{
    return m_utc ? QStringLiteral("UTC") : QDateTime::currentDateTime().timeZoneAbbreviation();
}

} // namespace once::ui
