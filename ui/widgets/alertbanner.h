#pragma once

#include "display/statuscolors.h"

#include <QFrame>

class QLabel;

namespace once::ui {

// A coloured strip at the top of a page listing what needs attention now, most severe
// first. Hidden while there is nothing to say.
class AlertBanner final : public QFrame
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(AlertBanner)

public:
    struct Alert
    {
        Severity severity = Severity::Warning;
        QString text;
    };

    explicit AlertBanner(QWidget *parent = nullptr);

    void setAlerts(QList<Alert> alerts);
    QList<Alert> alerts() const { return m_alerts; }
    // The alerts as shown, one per line.
    QString text() const;
    Severity severity() const { return m_severity; }

protected:
    void changeEvent(QEvent *event) override;
    void paintEvent(QPaintEvent *event) override;

private:
    void applyColours();

    QLabel *m_label = nullptr;
    QList<Alert> m_alerts;
    Severity m_severity = Severity::Normal;
    BannerColors m_colours;
};

} // namespace once::ui
