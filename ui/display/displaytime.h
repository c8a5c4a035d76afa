#pragma once

#include <QObject>
#include <QString>

namespace once::ui {

// Whether the console shows times in UTC or in this computer's zone: one choice for every
// page (View > Times in UTC), remembered in Settings. Send keys always end in UTC ("Z"),
// so support needs to know which of the two a "Scheduled 04:00" beside one is in.
class DisplayTime final : public QObject
{
    Q_OBJECT

public:
    static DisplayTime &instance();

    bool utc() const { return m_utc; }
    void setUtc(bool utc);
    // "UTC", or "local, UTC-05:00": what a column header adds to its name.
    QString zoneLabel() const;
    // "UTC" or "EST": what follows a single time.
    QString zoneAbbreviation() const;

signals:
    void changed();

private:
    DisplayTime() = default;
    bool m_utc = false;
};

} // namespace once::ui
